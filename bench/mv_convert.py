"""Converters: public graded-answer files -> one normalized JSONL for bench_vs_math_verify.py.

Every source is a file of a public GitHub repository, laid out under ``bench/data/raw/`` as
``<owner>+<name>/<path in the repo>`` (the fetched data is never committed: ``bench/data/`` is
git-ignored). ``--from-mirrors DIR`` copies the files out of bare git snapshots named
``DIR/<owner>+<name>/repo`` (what the search tool's ``fetch`` brings); a plain ``git clone``
of each repository, copied to the same layout, works too.

Each normalized row is one labelled verdict the grader must reproduce::

    {"set": ..., "kind": "pair" | "solution", "id": ..., "gold": ..., "answer": ...,
     "label": true | false, "label_by": "human" | "auto", "source": "<repo>/<path>"}

``kind == "pair"``: ``answer`` is the model's final answer as the data set itself marks it
(the text after ``#### `` / ``A: `` / ``# Answer``), never re-extracted by a grader under test.
``kind == "solution"``: ``answer`` is the model's whole solution text, graded end to end.

    python bench/mv_convert.py --from-mirrors /work/.mirror   # copy raw files, then convert
    python bench/mv_convert.py                                # convert bench/data/raw only
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import subprocess
import sys
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "bench" / "data"
RAW = DATA / "raw"
OUT = DATA / "rows.jsonl"


@dataclass(frozen=True)
class Row:
    """One labelled verdict: does ``answer`` match ``gold``? (see the module docstring)."""

    set: str
    kind: str
    id: str
    gold: str
    answer: str
    label: bool
    label_by: str
    source: str


# --------------------------------------------------------------------------------------------
# Final-answer markers the data sets themselves use (not a grader's extraction).

_GSM_FINAL = re.compile(r"^\s*(?:A:|####)\s*(?P<ans>.*?)\s*$", re.MULTILINE)
_HASH_FINAL = re.compile(r"####\s*(?P<ans>.*?)\s*$", re.DOTALL)
_DIGIT = re.compile(r"\d")
_PRM_FINAL = re.compile(r"^# Answer\s*\n+(?P<ans>.*?)\s*$", re.DOTALL)


def marked_answer(text: str, marker: re.Pattern[str]) -> str | None:
    """The text the data set marks as the final answer (its last match), or ``None``."""
    found = list(marker.finditer(text))
    if not found:
        return None
    ans = found[-1].group("ans").strip()
    return ans or None


# --------------------------------------------------------------------------------------------
# Sources


def convert_gsm8k_samples(lines: Iterable[str], source: str) -> Iterator[Row]:
    """openai/grade-school-math ``example_model_solutions.jsonl``: four models' solutions to
    each GSM8K test problem, ``is_correct`` computed by the authors (final number == gold)."""
    for n, line in enumerate(lines):
        if not line.strip():
            continue
        rec = json.loads(line)
        gold = marked_answer(rec["ground_truth"], _GSM_FINAL)
        if gold is None:
            continue
        for model, sample in rec.items():
            if not isinstance(sample, dict) or "solution" not in sample:
                continue
            sol = sample["solution"]
            label = bool(sample["is_correct"])
            rid = f"{n}:{model}"
            yield Row("gsm8k-samples", "solution", rid, gold, sol, label, "auto", source)
            ans = marked_answer(sol, _GSM_FINAL)
            if ans is not None:
                yield Row("gsm8k-samples", "pair", rid, gold, ans, label, "auto", source)


def convert_mr_gsm8k(docs: Iterable[str], source: str) -> Iterator[Row]:
    """dvlab-research/MR-GSM8K graded subsets (``eval_results/gpt4-grading/*.json``): GSM8K
    solutions with a human ``model_output_answer_correctness``. Program-of-thought rows (a
    program, no answer text) are skipped, and so are rows whose gold has no digit (a few
    carry a prompt fragment, "Let's think step by step.", as their gold: every GSM8K answer is
    a number); a uuid seen in several files is kept once."""
    seen: set[str] = set()
    for doc in docs:
        for rec in json.loads(doc):
            gold = str(rec["ground_truth_answer"]).strip()
            if rec.get("question_type") == "POT" or rec["uuid"] in seen or not _DIGIT.search(gold):
                continue
            seen.add(rec["uuid"])
            steps = [re.sub(r"^Step \d+:\s*", "", s) for s in rec["model_output_steps"]]
            sol = "\n".join(steps)
            label = rec["model_output_answer_correctness"] == "correct"
            rid = rec["uuid"]
            yield Row("mr-gsm8k", "solution", rid, gold, sol, label, "human", source)
            ans = marked_answer(sol, _HASH_FINAL)
            if ans is not None:
                ans = ans.splitlines()[0].strip()
                yield Row("mr-gsm8k", "pair", rid, gold, ans, label, "human", source)


def convert_mr_math(lines: Iterable[str], source: str) -> Iterator[Row]:
    """GAIR-NLP/ReasonEval MR-MATH (``dataset/mr-math_*_errors.json``, JSON lines): MATH
    solutions with human labels. ``invalid_errors`` rows carry
    ``model_output_answer_correctness``; ``redundant_errors`` rows are PRM800K GPT-4 solutions
    whose last step is ``# Answer`` and carry PRM800K step ratings: the answer step rated 1 is
    a right answer, -1 a wrong one; 0 (neutral) is left out as unlabelled."""
    for line in lines:
        if not line.strip():
            continue
        rec = json.loads(line)
        gold = str(rec["ground_truth_answer"]).strip()
        rid = f"{Path(source).stem}:{rec['id']}"
        if "model_output_answer_correctness" in rec:
            sol = rec["model_output"]
            label = rec["model_output_answer_correctness"] == "correct"
            yield Row("mr-math", "solution", rid, gold, sol, label, "human", source)
            ans = marked_answer(sol, _HASH_FINAL)
        else:
            steps = ["\n".join(s) for s in rec["model_output_step_format"]]
            last = steps[-1] if steps else ""
            rating = rec["rating"][-1] if rec.get("rating") else 0
            if not last.startswith("# Answer") or rating == 0:
                continue
            sol = "\n\n".join(steps)
            label = rating > 0
            yield Row("mr-math", "solution", rid, gold, sol, label, "human", source)
            ans = marked_answer(last, _PRM_FINAL)
        if ans is not None:
            yield Row("mr-math", "pair", rid, gold, ans, label, "human", source)


def convert_qwen_math_samples(lines: Iterable[str], source: str) -> Iterator[Row]:
    """Qwen2.5-Math's evaluation example ``math_cot_100.jsonl`` (100 MATH problems, 8 boxed
    samples each, as copied into KbsdJames/omni-math-rule): ``code`` holds the solutions,
    ``pred`` the answers Qwen2.5-Math's extractor took from them and ``score`` its grader's
    verdicts (auto labels: that grader's own mistakes are in them)."""
    for line in lines:
        if not line.strip():
            continue
        rec = json.loads(line)
        gold = str(rec["gt"]).strip()
        for k, (sol, pred, score) in enumerate(
            zip(rec["code"], rec["pred"], rec["score"], strict=True)
        ):
            rid = f"{rec['idx']}:{k}"
            label = bool(score)
            yield Row("qwen-math-samples", "solution", rid, gold, sol, label, "auto", source)
            if pred:
                yield Row("qwen-math-samples", "pair", rid, gold, str(pred), label, "auto", source)


def convert_unittest_equivalence(docs: Iterable[str], source: str) -> Iterator[Row]:
    """A grader's own unittest file (hendrycks/math ``math_equivalence_test.py``): each test
    method assigns ``test_in`` (read as the gold) and ``test_out`` (the answer) string literals
    and asserts ``assertTrue`` / ``assertFalse`` of ``is_equiv(test_in, test_out)``. Read with
    ``ast``, never executed; a method of any other shape is skipped."""
    for doc in docs:
        for node in ast.walk(ast.parse(doc)):
            if not isinstance(node, ast.FunctionDef) or not node.name.startswith("test"):
                continue
            strings: dict[str, str] = {}
            label: bool | None = None
            for stmt in node.body:
                if (
                    isinstance(stmt, ast.Assign)
                    and len(stmt.targets) == 1
                    and isinstance(stmt.targets[0], ast.Name)
                    and isinstance(stmt.value, ast.Constant)
                    and isinstance(stmt.value.value, str)
                ):
                    strings[stmt.targets[0].id] = stmt.value.value
                elif (
                    isinstance(stmt, ast.Expr)
                    and isinstance(stmt.value, ast.Call)
                    and isinstance(stmt.value.func, ast.Attribute)
                    and stmt.value.func.attr in ("assertTrue", "assertFalse")
                ):
                    label = stmt.value.func.attr == "assertTrue"
            if label is None or not {"test_in", "test_out"} <= strings.keys():
                continue
            gold, answer = strings["test_in"], strings["test_out"]
            yield Row("grader-tests", "pair", node.name, gold, answer, label, "human", source)


@dataclass(frozen=True)
class Source:
    """One public file (or group of files) and the converter that reads it."""

    repo: str
    paths: tuple[str, ...]
    convert: Callable[..., Iterator[Row]]
    whole_file: bool = False  # the converter takes whole documents, not lines


SOURCES: tuple[Source, ...] = (
    Source(
        "openai/grade-school-math",
        ("grade_school_math/data/example_model_solutions.jsonl",),
        convert_gsm8k_samples,
    ),
    Source(
        "dvlab-research/MR-GSM8K",
        tuple(
            f"eval_results/gpt4-grading/{name}_eval_results.json"
            for name in (
                "Claude",
                "GPT3_5",
                "llama2_70b",
                "mammoth_70B",
                "metamath_70B",
                "wizardmath_70B",
            )
        ),
        convert_mr_gsm8k,
        whole_file=True,
    ),
    Source(
        "GAIR-NLP/ReasonEval",
        ("dataset/mr-math_invalid_errors.json", "dataset/mr-math_redundant_errors.json"),
        convert_mr_math,
    ),
    Source(
        "KbsdJames/omni-math-rule",
        ("evaluation/data/eval_rm_maj_example/math_cot_100.jsonl",),
        convert_qwen_math_samples,
    ),
    Source(
        "hendrycks/math",
        ("modeling/math_equivalence_test.py",),
        convert_unittest_equivalence,
        whole_file=True,
    ),
)


def raw_path(repo: str, path: str, raw: Path = RAW) -> Path:
    return raw / repo.replace("/", "+") / path


def copy_from_mirrors(mirrors: Path, raw: Path = RAW) -> None:
    """Copy every source file out of the bare snapshots under ``mirrors`` (``git show``)."""
    for src in SOURCES:
        git_dir = mirrors / src.repo.replace("/", "+") / "repo"
        for path in src.paths:
            blob = subprocess.run(
                ["git", "--git-dir", str(git_dir), "show", f"HEAD:{path}"],
                capture_output=True,
                check=True,
            ).stdout
            dest = raw_path(src.repo, path, raw)
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_bytes(blob)


def convert_all(raw: Path = RAW) -> list[Row]:
    """Every row of every source present under ``raw`` (a missing file is reported, skipped)."""
    rows: list[Row] = []
    for src in SOURCES:
        present = [p for p in src.paths if raw_path(src.repo, p, raw).exists()]
        for p in sorted(set(src.paths) - set(present)):
            print(f"missing: {raw_path(src.repo, p, raw)}", file=sys.stderr)
        if src.whole_file:
            docs = [raw_path(src.repo, p, raw).read_text() for p in present]
            rows.extend(src.convert(docs, f"{src.repo}/{Path(src.paths[0]).parent}/"))
            continue
        for p in present:
            lines = raw_path(src.repo, p, raw).read_text().splitlines()
            rows.extend(src.convert(lines, f"{src.repo}/{p}"))
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--from-mirrors", type=Path, help="copy raw files from bare snapshots first")
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args()
    if args.from_mirrors:
        copy_from_mirrors(args.from_mirrors)
    rows = convert_all()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with args.out.open("w") as f:
        for row in rows:
            f.write(json.dumps(asdict(row), ensure_ascii=False) + "\n")
    counts: dict[tuple[str, str], list[int]] = {}
    for r in rows:
        c = counts.setdefault((r.set, r.kind), [0, 0])
        c[r.label] += 1
    for (name, kind), (neg, pos) in sorted(counts.items()):
        print(f"{name:16} {kind:8} {pos + neg:6} rows ({pos} labelled right)")
    print(f"-> {args.out}")


if __name__ == "__main__":
    main()
