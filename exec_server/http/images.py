"""``GET /images``: the images a request may name, with their versions and their checks."""

from __future__ import annotations

from fastapi import APIRouter, Request

from ..models import ImageInfo, ImagesResponse
from .auth import GUARDED

router = APIRouter(dependencies=GUARDED, tags=["images"])


@router.get("/images", response_model=ImagesResponse)
async def list_images(request: Request) -> ImagesResponse:
    """Every image of this server's allow-list (``default`` first): the name a request gives
    as ``image``, its reference and the id its sandboxes are made from, the versions its
    labels record, what a derived image adds, its limits and whether it serves now."""
    engine = request.app.state.executor.engine
    return ImagesResponse(images=[ImageInfo(**image.describe()) for image in engine.images])
