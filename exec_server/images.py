"""Operator images: the allow-list of sandbox images a request may name, and their checks.

The operator lists images by name (``BOXED_IMAGES``, ``BOXED_IMAGES_FILE``): name -> image
reference, with limits of its own. ``default`` is always there and is ``BOXED_SANDBOX_IMAGE``
with the server's limits. A request names an image (``"image": "NAME"``), never a reference:
a name off the list is a 422. Every image runs on the same backend code as the default one,
with the same hardening; only the image and the limits below differ.

Before an image serves a sandbox its filesystem is scanned (``image_scan``): one carrying a
device node outside ``/dev`` is refused (the service does not start, or, when the engine came
up later, the image answers 503 until it is replaced). Its backends then make containers from
the *id* that was scanned, not the tag: a tag moved to another image is scanned again before
that image serves anyone.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .image_labels import sandbox_versions
from .image_scan import ImageReport
from .request_errors import RequestError
from .settings import MIN_MEMORY_MB, Settings

log = logging.getLogger("boxed.images")
DEFAULT = "default"
NAME = re.compile(r"^[a-z0-9][a-z0-9_.-]{0,62}$")
MAX_IMAGE_POOL = 8  # warm sandboxes one operator image may keep
ADDS_LABEL = "boxed.adds"  # what a derived image adds to its base (tools/derive_image.py)
NOT_CHECKED = "not checked yet (the engine has not answered since the start)"


class ImageSpec(BaseModel):
    """One allow-listed image: its reference and its own limits (unset: the server's)."""

    model_config = ConfigDict(extra="forbid")

    image: str = Field(min_length=1, description="The image reference (tag or id).")
    memory_mb_max: int | None = Field(
        default=None, ge=MIN_MEMORY_MB, description="Largest memory limit a request may ask."
    )
    timeout_max: float | None = Field(
        default=None, gt=0, description="Largest wall-clock (and CPU) limit a request may ask."
    )
    pool_size: int = Field(
        default=0,
        ge=0,
        le=MAX_IMAGE_POOL,
        description="Warm sandboxes kept (0: each is made when asked for, about a second).",
    )
    session_pool_size: int = Field(
        default=0,
        ge=0,
        le=MAX_IMAGE_POOL,
        description="Warm session sandboxes kept (0: each session starts its own).",
    )


def _listed(settings: Settings) -> dict[str, Any]:
    """The operator's entries: BOXED_IMAGES, then those of BOXED_IMAGES_FILE."""
    entries: dict[str, Any] = dict(settings.images or {})
    if settings.images_file:
        path = Path(settings.images_file)
        try:
            more = json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            raise ValueError(f"BOXED_IMAGES_FILE {path}: {exc}") from exc
        if not isinstance(more, dict):
            raise ValueError(f"BOXED_IMAGES_FILE {path}: not a JSON object of name -> image")
        for name in set(entries) & set(more):
            raise ValueError(f"image {name!r} is in both BOXED_IMAGES and BOXED_IMAGES_FILE")
        entries.update(more)
    return entries


def allow_list(settings: Settings) -> dict[str, ImageSpec]:
    """Every image a request may name, ``default`` first; ValueError says what is wrong."""
    specs = {DEFAULT: ImageSpec(image=settings.sandbox_image)}
    for name, entry in _listed(settings).items():
        if name == DEFAULT:
            raise ValueError("the image 'default' is BOXED_SANDBOX_IMAGE; name the others")
        if not NAME.match(name):
            raise ValueError(
                f"image name {name!r}: lower-case letters, digits, '.', '_', '-', at most 63"
            )
        try:
            spec = ImageSpec.model_validate({"image": entry} if isinstance(entry, str) else entry)
        except ValidationError as exc:
            raise ValueError(f"image {name!r}: {exc.errors()[0]['msg']} ({entry!r})") from None
        if (spec.memory_mb_max or 0) > settings.memory_mb_max:
            raise ValueError(f"image {name!r}: memory_mb_max exceeds BOXED_MEMORY_MB_MAX")
        if (spec.timeout_max or 0) > settings.timeout_max:
            raise ValueError(f"image {name!r}: timeout_max exceeds BOXED_TIMEOUT_MAX")
        specs[name] = spec
    return specs


def image_settings(settings: Settings, spec: ImageSpec) -> Settings:
    """The settings one image's backends and requests use: the server's, with its reference
    and its maxima (the defaults lowered to them where they were higher)."""
    memory = spec.memory_mb_max or settings.memory_mb_max
    timeout = spec.timeout_max or settings.timeout_max
    cpu_default = settings.cpu_timeout_default
    return settings.model_copy(
        update={
            "sandbox_image": spec.image,
            "memory_mb_max": memory,
            "memory_mb_default": min(settings.memory_mb_default, memory),
            "compile_memory_mb": min(settings.compile_memory_mb, memory),
            "timeout_max": timeout,
            "timeout_default": min(settings.timeout_default, timeout),
            "cpu_timeout_default": None if cpu_default is None else min(cpu_default, timeout),
        }
    )


@dataclass
class OperatorImage:
    """One allow-listed image at run time: its settings, and what its check found."""

    name: str
    spec: ImageSpec
    settings: Settings
    report: ImageReport | None = None  # the last check that passed (its id serves)
    problem: str | None = NOT_CHECKED  # why it serves no sandbox now
    refused: dict[str, str] = field(default_factory=dict)  # image id (or "backend") -> why

    @property
    def serving(self) -> bool:
        return self.problem is None

    @property
    def session_pool_size(self) -> int:
        """Warm session sandboxes it asks for: BOXED_SESSION_POOL_SIZE for the default image,
        its own ``session_pool_size`` for the others (``BOXED_MAX_SESSIONS`` caps the sum)."""
        if self.name == DEFAULT:
            return self.settings.session_pool_size
        return self.spec.session_pool_size

    def describe(self) -> dict[str, Any]:
        """Its row of ``GET /images``."""
        report = self.report
        labels = report.labels if report else {}
        scan = report.scan if report else None
        try:
            adds = json.loads(labels.get(ADDS_LABEL) or "null")
        except ValueError:
            adds = None
        return {
            "name": self.name,
            "default": self.name == DEFAULT,
            "reference": self.spec.image,
            "image_id": report.image_id if report else None,
            "available": self.serving,
            "problem": self.problem,
            "versions": sandbox_versions(labels),
            "adds": adds if isinstance(adds, dict) else None,
            "limits": {
                "memory_mb_max": self.settings.memory_mb_max,
                "timeout_max": self.settings.timeout_max,
            },
            "pool_size": self.settings.pool_size if self.name == DEFAULT else self.spec.pool_size,
            "session_pool_size": self.session_pool_size,
            "setuid_files": None if scan is None else len(scan.setuid_files),
        }


class ImageSet:
    """The allow-list at run time, by name."""

    def __init__(self, settings: Settings) -> None:
        specs = allow_list(settings)
        self.by_name = {
            name: OperatorImage(
                name, spec, settings if name == DEFAULT else image_settings(settings, spec)
            )
            for name, spec in specs.items()
        }

    def __iter__(self) -> Iterator[OperatorImage]:
        return iter(self.by_name.values())

    def named(self, name: str | None) -> OperatorImage:
        """The image a request names (None: the default); 422 for a name off the list."""
        if name is None:
            return self.by_name[DEFAULT]
        image = self.by_name.get(name)
        if image is None:
            known = ", ".join(sorted(self.by_name))
            raise RequestError(
                422, f"image {name!r} is not one of this server's images: {known}", "image"
            )
        return image

    def accept(self, image: OperatorImage, report: ImageReport) -> bool:
        """Take ``report`` of ``image``'s check: it serves from that id, or is refused."""
        refusal = report.scan.refusal
        if refusal is not None:
            if report.image_id not in image.refused:
                log.error(
                    "image %r (%s, %s) refused: %s",
                    image.name,
                    report.reference,
                    report.image_id[:19],
                    refusal,
                )
            image.refused[report.image_id] = refusal
            image.problem = f"image {image.name!r} ({report.reference}) is refused: {refusal}"
            return False
        if image.report is None or image.report.image_id != report.image_id:
            setuid = report.scan.setuid_files
            log.info(
                "image %r (%s, %s) checked%s: no device node outside /dev; %d set-uid/set-gid "
                "file(s)%s, inert: every sandbox runs with no-new-privileges",
                image.name,
                report.reference,
                report.image_id[:19],
                " (scan cached)"
                if report.scan_seconds is None
                else f" in {report.scan_seconds:.1f} s",
                len(setuid),
                f" ({', '.join('/' + p for p in setuid[:5])}{', ...' if len(setuid) > 5 else ''})"
                if setuid
                else "",
            )
        image.report = report
        image.problem = None
        return True
