"""Converters: public graded-answer files -> one normalized JSONL for bench_vs_math_verify.py.

Every source is a file of a public GitHub repository, laid out under ``bench/data/raw/`` as
``<owner>+<name>/<path in the repo>`` (the fetched data is never committed: ``bench/data/`` is
git-ignored). ``--from-mirrors DIR`` copies the files out of bare git snapshots named
``DIR/<owner>+<name>/repo`` (what the search tool's ``fetch`` brings); a plain ``git clone``
of each repository, copied to the same layout, works too.

Each normalized row is one labelled verdict the grader must reproduce::

    {"set": ..., "kind": "pair" | "solution", "id": ..., "gold": ..., "answer": ...,
     "label": true | false, "label_by": "human" | "auto", "source": "<repo>/<path>",
     "suspect": null | "<why the gold contradicts the label>",
     "question": null | "<the problem text, when the data set ships it>"}

``kind == "pair"``: ``answer`` is the model's final answer as the data set itself marks it
(the text after ``#### `` / ``A: `` / ``# Answer``), never re-extracted by a grader under test.
``kind == "solution"``: ``answer`` is the model's whole solution text, graded end to end.

``suspect`` is the label audit (``suspect_reason``): a rule on the gold, the answer the data set
marks and the label alone, never on a grader's verdict, sets aside rows whose label the gold
itself contradicts (an answer identical to the gold labelled wrong, a different plain number
labelled right). The bench reports them apart and leaves them out of the headline figures.

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
from dataclasses import asdict, dataclass, replace
from functools import partial
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
    suspect: str | None = None
    question: str | None = None  # the problem text, when the data set ships it


# --------------------------------------------------------------------------------------------
# Label audit: rows whose label the gold itself contradicts

_PLAIN_NUMBER = re.compile(r"^[-+]?(?:\d+(?:\.\d*)?|\.\d+)$")
_LATEX_NOISE = re.compile(r"\\[!,;: ]|\\(?:left|right)\b|\\?\$|\s+")


def plain_text(answer: str) -> str:
    """``answer`` without spacing, ``$`` or ``\\$``, ``\\left``/``\\right``, thin spaces and a
    final period, ``\\dfrac``/``\\tfrac`` read as ``\\frac``: two answers equal here are the
    same text to any reader."""
    text = _LATEX_NOISE.sub("", answer)
    text = text.replace("\\dfrac", "\\frac").replace("\\tfrac", "\\frac")
    return text.rstrip(".")


_THOUSANDS = re.compile(r"^[-+]?\d{1,3}(?:,\d{3})+(?:\.\d*)?$")


def _plain_number(answer: str) -> float | None:
    """The value of a plain decimal number (thousands separators allowed), else ``None``."""
    text = plain_text(answer).replace("{,}", ",")
    if _THOUSANDS.match(text):
        text = text.replace(",", "")
    return float(text) if _PLAIN_NUMBER.match(text) else None


def suspect_reason(gold: str, answer: str | None, label: bool) -> str | None:
    """Why this row's label contradicts its own gold, or ``None``: the answer is the gold's
    text labelled wrong, both are plain numbers that differ and the answer is labelled right,
    or a plain number is labelled right for a gold in words (``\\text{Navin}``). Decided from
    the data alone (a labeller's slip, not a grader's opinion)."""
    if answer is None:
        return None
    if not label and plain_text(answer) == plain_text(gold):
        return "labelled wrong, identical to the gold"
    g, a = _plain_number(gold), _plain_number(answer)
    if label and g is not None and a is not None and g != a:
        return "labelled right, a different number than the gold"
    if not label and g is not None and g == a:
        return "labelled wrong, the gold's number"
    if label and a is not None and _WORD_GOLD.fullmatch(gold.strip()):
        return "labelled right, a number for a gold in words"
    return None


_WORD_GOLD = re.compile(r"(?:\\text\{)?\s*[A-Za-z][A-Za-z ]+\s*\}?")


_MATH_SEGMENT = re.compile(r"\$([^$]+)\$|\\\((.+?)\\\)|\\\[(.+?)\\\]", re.DOTALL)
_NUMBER = re.compile(r"(?<![\d./])[-+]?\d[\d,]*(?:\.\d+)?(?:/\d+)?(?![\d/])")
_HEDGE = re.compile(r"\bor\b")


def stated_value(step: str) -> str | None:
    """The value a solution's last step states, read as plainly as a labeller would: whichever
    comes last of its last math segment (the part after that segment's last ``=``) and its last
    number in prose; ``None`` when the step offers alternatives (an "or"). Used by the label
    audit only, never to grade."""
    if _HEDGE.search(step):
        return None
    found: list[tuple[int, str]] = []
    segments = list(_MATH_SEGMENT.finditer(step))
    if segments:
        seg = segments[-1]
        body = next(g for g in seg.groups() if g)
        found.append((seg.end(), body.rsplit("=", 1)[-1].strip().rstrip(".")))
    prose = _MATH_SEGMENT.sub(lambda m: " " * len(m.group(0)), step)
    numbers = list(_NUMBER.finditer(prose))
    if numbers:
        found.append((numbers[-1].end(), numbers[-1].group(0).rstrip(",")))
    return max(found)[1] if found else None


_MEMBER_OF = re.compile(r"^[A-Za-z]\\in(?![A-Za-z])")
_UNIT_TEXT = re.compile(r"\\(?:mbox|text|mathrm)\{[A-Za-z ]*\}(?:\^\{?\d\}?)?$")
_SIMPLE_FRAC = re.compile(r"\\frac\{(-?\d+)\}\{(\d+)\}")


def stated_form(value: str) -> str:
    """``value`` (a stated value or a gold) as a labeller compares it: ``plain_text`` past a
    leading ``x \\in``, an exact value before ``\\approx`` its rounding, a unit in text
    (``\\mbox{ inches}^2``), a percent sign, and ``\\frac{a}{b}`` of integers as ``a/b``. Two
    values with one stated form are the same answer written two ways (audit only)."""
    text = plain_text(value).split("\\approx", 1)[0]
    text = _UNIT_TEXT.sub("", _MEMBER_OF.sub("", text)).removesuffix("\\%")
    return _SIMPLE_FRAC.sub(r"\1/\2", text)


def audit(rows: list[Row]) -> list[Row]:
    """``rows`` with ``suspect`` set by ``suspect_reason``: a pair on its own answer, a solution
    on the answer its data set marks (the pair row of the same set and id), if any."""
    marked = {(r.set, r.id): r.answer for r in rows if r.kind == "pair"}
    out = []
    for r in rows:
        answer = r.answer if r.kind == "pair" else marked.get((r.set, r.id))
        reason = r.suspect or suspect_reason(r.gold, answer, r.label)
        out.append(replace(r, suspect=reason))
    return out


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
        q = {"question": rec.get("question")}
        for model, sample in rec.items():
            if not isinstance(sample, dict) or "solution" not in sample:
                continue
            sol = sample["solution"]
            label = bool(sample["is_correct"])
            rid = f"{n}:{model}"
            yield Row("gsm8k-samples", "solution", rid, gold, sol, label, "auto", source, **q)
            ans = marked_answer(sol, _GSM_FINAL)
            if ans is not None:
                yield Row("gsm8k-samples", "pair", rid, gold, ans, label, "auto", source, **q)


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
            q = {"question": rec.get("question")}
            steps = [re.sub(r"^Step \d+:\s*", "", s) for s in rec["model_output_steps"]]
            sol = "\n".join(steps)
            label = rec["model_output_answer_correctness"] == "correct"
            rid = rec["uuid"]
            yield Row("mr-gsm8k", "solution", rid, gold, sol, label, "human", source, **q)
            ans = marked_answer(sol, _HASH_FINAL)
            if ans is not None:
                ans = ans.splitlines()[0].strip()
                yield Row("mr-gsm8k", "pair", rid, gold, ans, label, "human", source, **q)


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
        q = {"question": rec.get("question")}
        if "model_output_answer_correctness" in rec:
            sol = rec["model_output"]
            label = rec["model_output_answer_correctness"] == "correct"
            yield Row("mr-math", "solution", rid, gold, sol, label, "human", source, **q)
            ans = marked_answer(sol, _HASH_FINAL)
        else:
            steps = ["\n".join(s) for s in rec["model_output_step_format"]]
            last = steps[-1] if steps else ""
            rating = rec["rating"][-1] if rec.get("rating") else 0
            if not last.startswith("# Answer") or rating == 0:
                continue
            sol = "\n\n".join(steps)
            label = rating > 0
            yield Row("mr-math", "solution", rid, gold, sol, label, "human", source, **q)
            ans = marked_answer(last, _PRM_FINAL)
        if ans is not None:
            yield Row("mr-math", "pair", rid, gold, ans, label, "human", source, **q)


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
        q = {"question": rec.get("question")}
        for k, (sol, pred, score) in enumerate(
            zip(rec["code"], rec["pred"], rec["score"], strict=True)
        ):
            rid = f"{rec['idx']}:{k}"
            label = bool(score)
            yield Row("qwen-math-samples", "solution", rid, gold, sol, label, "auto", source, **q)
            if pred:
                yield Row(
                    "qwen-math-samples", "pair", rid, gold, str(pred), label, "auto", source, **q
                )


def _str_const(node: ast.expr) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _assert_label(stmt: ast.stmt) -> bool | None:
    """``True``/``False`` for ``self.assertTrue(f(test_in, test_out, ...))`` /
    ``assertFalse(...)`` whose first two arguments are the names ``test_in`` and ``test_out``
    (whatever ``f`` is: the file's equivalence function or a helper returning it), else ``None``."""
    if not (
        isinstance(stmt, ast.Expr)
        and isinstance(stmt.value, ast.Call)
        and isinstance(stmt.value.func, ast.Attribute)
        and stmt.value.func.attr in ("assertTrue", "assertFalse")
        and stmt.value.args
        and isinstance(stmt.value.args[0], ast.Call)
    ):
        return None
    args = stmt.value.args[0].args[:2]
    if [a.id for a in args if isinstance(a, ast.Name)] != ["test_in", "test_out"]:
        return None
    return stmt.value.func.attr == "assertTrue"


def _pair_list(node: ast.expr) -> list[tuple[str, str]] | None:
    """A literal list of ``(str, str)`` tuples, else ``None``."""
    if not isinstance(node, ast.List):
        return None
    pairs = []
    for elt in node.elts:
        if not isinstance(elt, ast.Tuple) or len(elt.elts) != 2:
            return None
        a, b = (_str_const(e) for e in elt.elts)
        if a is None or b is None:
            return None
        pairs.append((a, b))
    return pairs


def unittest_pairs(doc: str) -> Iterator[tuple[str, str, str, bool]]:
    """(test name, ``test_in``, ``test_out``, asserted equal?) of every assertion of a grader's
    unittest file, read with ``ast`` and never executed. Understood shapes, statement by
    statement in each ``test*`` method: ``test_in = "..."`` / ``test_out = "..."`` then
    ``self.assertTrue|assertFalse(f(test_in, test_out, ...))``; and ``NAME = [("in", "out"),
    ...]`` then ``for test_in, test_out in NAME:`` around such an assertion. Anything else is
    skipped."""
    for node in ast.walk(ast.parse(doc)):
        if not isinstance(node, ast.FunctionDef) or not node.name.startswith("test"):
            continue
        strings: dict[str, str] = {}
        lists: dict[str, list[tuple[str, str]]] = {}
        for stmt in node.body:
            if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
                target = stmt.targets[0]
                if isinstance(target, ast.Name) and _str_const(stmt.value) is not None:
                    strings[target.id] = _str_const(stmt.value) or ""
                elif isinstance(target, ast.Name) and _pair_list(stmt.value) is not None:
                    lists[target.id] = _pair_list(stmt.value) or []
            elif (label := _assert_label(stmt)) is not None:
                if {"test_in", "test_out"} <= strings.keys():
                    yield node.name, strings["test_in"], strings["test_out"], label
            elif (
                isinstance(stmt, ast.For)
                and isinstance(stmt.iter, ast.Name)
                and stmt.iter.id in lists
                and isinstance(stmt.target, ast.Tuple)
                and [e.id for e in stmt.target.elts if isinstance(e, ast.Name)]
                == ["test_in", "test_out"]
                and len(stmt.body) == 1
                and (label := _assert_label(stmt.body[0])) is not None
            ):
                for test_in, test_out in lists[stmt.iter.id]:
                    yield node.name, test_in, test_out, label


def convert_unittest_equivalence(
    docs: Iterable[str], source: str, set_name: str = "grader-tests"
) -> Iterator[Row]:
    """A grader's own unittest file (hendrycks/math ``math_equivalence_test.py``, MARIO_EVAL's
    ``test_is_equiv.py``): each asserted pair is a row, ``test_in`` read as the gold and
    ``test_out`` as the answer, labelled by its authors' assertion (``unittest_pairs``). The
    labels are that grader's policy (units dropped, a tolerance on decimals), not only
    mathematics: the doc says where they differ."""
    for doc in docs:
        counts: dict[str, int] = {}
        for name, gold, answer, label in unittest_pairs(doc):
            k = counts[name] = counts.get(name, -1) + 1
            yield Row(set_name, "pair", f"{name}#{k}", gold, answer, label, "human", source)


def last_box(text: str) -> str | None:
    """The content of the last ``\\boxed{...}`` in ``text`` (braces balanced), or ``None``:
    how the MATH-style data sets mark a solution's final answer."""
    start = text.rfind("\\boxed{")
    if start < 0:
        return None
    depth, i = 0, start + len("\\boxed")
    for j in range(i, len(text)):
        depth += {"{": 1, "}": -1}.get(text[j], 0)
        if depth == 0:
            return text[i + 1 : j].strip() or None
    return None


def convert_rewardbench_math(docs: Iterable[str], source: str) -> Iterator[Row]:
    """RewardBench's ``math-prm`` subset as RewardMATH ships it
    (``results/Rewardbench/rewardbench_Math_Shepherd.json``: 447 MATH test problems, each with a
    ``chosen`` solution, a human-written one rewritten by GPT-4, and a ``rejected`` one, a
    GPT-4 solution PRM800K's labellers graded wrong). The gold is the problem's MATH answer from
    ``dataset/math_test/experiments_test_filtered.json`` (the first document). Label = chosen;
    a pair row when the solution's last step has a ``\\boxed{}``. A rejected solution is
    rejected for a step a labeller rated wrong, not for its answer: one whose last step states
    the gold (``stated_value``, compared as plain numbers or in ``stated_form``) is
    ``suspect``."""
    answers_doc, *rest = docs
    golds = {rec["problem"]: str(rec["answer"]).strip() for rec in json.loads(answers_doc)}
    for doc in rest:
        for n, rec in enumerate(json.loads(doc)):
            gold = golds.get(rec["problem"])
            if gold is None:
                continue
            steps = rec["eval_solution"]
            sol = "\n\n".join(steps)
            label = rec["solution_type"] == "chosen"
            rid = f"{rec['problem_id']}:{rec['solution_type']}:{n}"
            stated = stated_value(steps[-1]) if steps and not label else None
            states_gold = stated is not None and (
                suspect_reason(gold, stated, label) is not None
                or stated_form(stated) == stated_form(gold)
            )
            suspect = (
                "rejected for a step (PRM800K's rating), its last step states the gold"
                if states_gold
                else None
            )
            q = {"question": rec["problem"]}
            yield Row(
                "rewardbench-math", "solution", rid, gold, sol, label, "human", source, suspect, **q
            )
            ans = last_box(steps[-1]) if steps else None
            if ans is not None:
                yield Row("rewardbench-math", "pair", rid, gold, ans, label, "human", source, **q)


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
    Source(
        "MARIO-Math-Reasoning/MARIO_EVAL",
        ("math_evaluation/tests/test_is_equiv.py",),
        partial(convert_unittest_equivalence, set_name="mario-tests"),
        whole_file=True,
    ),
    Source(
        "kimsh0507/RewardMATH_official",
        (
            "dataset/math_test/experiments_test_filtered.json",
            "results/Rewardbench/rewardbench_Math_Shepherd.json",
        ),
        convert_rewardbench_math,
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
    """Every row of every source present under ``raw`` (a missing file is reported, skipped;
    so is a whole-file source with any file missing), with the label audit applied."""
    rows: list[Row] = []
    for src in SOURCES:
        present = [p for p in src.paths if raw_path(src.repo, p, raw).exists()]
        for p in sorted(set(src.paths) - set(present)):
            print(f"missing: {raw_path(src.repo, p, raw)}", file=sys.stderr)
        if src.whole_file:
            if len(present) < len(src.paths):
                continue  # its documents are read together (and by position): all or none
            docs = [raw_path(src.repo, p, raw).read_text() for p in present]
            rows.extend(src.convert(docs, f"{src.repo}/{Path(src.paths[0]).parent}/"))
            continue
        for p in present:
            lines = raw_path(src.repo, p, raw).read_text().splitlines()
            rows.extend(src.convert(lines, f"{src.repo}/{p}"))
    return audit(rows)


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
        c = counts.setdefault((r.set, r.kind), [0, 0, 0])
        c[r.label] += 1
        c[2] += r.suspect is not None
    for (name, kind), (neg, pos, suspect) in sorted(counts.items()):
        print(f"{name:18} {kind:8} {pos + neg:6} rows ({pos} labelled right, {suspect} suspect)")
    print(f"-> {args.out}")


if __name__ == "__main__":
    main()
