"""`python -m mscl bench preprocess`: throughput and peak memory of `prepare-mimic` at 1x and 10x.

Writes synthetic MIMIC-III files in the real format (NOTEEVENTS with multi-line quoted TEXT,
discharge summaries, addenda and other note categories; DIAGNOSES_ICD; PROCEDURES_ICD; split
lists and a top-50 list), runs `python -m mscl prepare-mimic` on each size in a child process
and prints input MB, wall seconds, MB/s and the child's peak RSS. Peak RSS is `ru_maxrss` of
that child's rusage (`os.wait4`, the per-child form of `getrusage(RUSAGE_CHILDREN)`), so the
10x/1x ratio shows whether memory grows with the note file. Figures only, never pass/fail.
"""

from __future__ import annotations

import csv
import shutil
import sys
import tempfile
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from tqdm import tqdm

from mscl import cli
from mscl.bench.memory import run_measured
from mscl.data.mimic import dot_diagnosis, dot_procedure

NOTE_HEADER = ["ROW_ID", "SUBJECT_ID", "HADM_ID", "CHARTDATE", "CHARTTIME", "STORETIME", "CATEGORY", "DESCRIPTION", "CGID", "ISERROR", "TEXT"]
CODE_HEADER = ["ROW_ID", "SUBJECT_ID", "HADM_ID", "SEQ_NUM", "ICD9_CODE"]
OTHER_CATEGORIES = ("Nursing/other", "Radiology", "ECG", "Physician ")
WORDS = (
    "patient admitted with chest pain shortness of breath fever cough history hypertension diabetes "
    "mellitus coronary artery disease renal failure sepsis pneumonia treated antibiotics discharged "
    "home stable condition follow up cardiology clinic medications aspirin metoprolol lisinopril "
    "insulin heparin lasix echocardiogram ejection fraction normal sinus rhythm creatinine hematocrit "
    "white count platelets blood cultures negative chest x-ray infiltrate right lower lobe denies "
    "nausea vomiting abdominal exam soft non-tender extremities edema bilateral neurologic intact"
).split()
SENTENCE_POOL = 4_000  # distinct synthetic sentences notes are assembled from
REPORT_SENTENCES, ADDENDUM_SENTENCES, OTHER_SENTENCES = 30, 5, 10  # ~3 KB, ~0.5 KB, ~1 KB of text
ADDENDUM_RATE, OTHER_NOTE_RATE = 0.2, 0.5  # per admission
DIAGNOSES_PER_ADMISSION, PROCEDURES_PER_ADMISSION = 10, 3
NOTES_PER_ADMISSION = 1 + ADDENDUM_RATE + OTHER_NOTE_RATE


@dataclass(frozen=True)
class Measurement:
    scale: int
    notes: int
    admissions: int
    input_mb: float
    wall_s: float
    peak_rss_mb: float

    @property
    def mb_per_s(self) -> float:
        return self.input_mb / self.wall_s


def sentence_pool(rng: np.random.Generator) -> list[str]:
    """Sentences with the punctuation, numbers, dates, quotes and line breaks of real notes."""
    pool = []
    for index in range(SENTENCE_POOL):
        words = rng.choice(WORDS, size=int(rng.integers(8, 20)))
        body = " ".join(words).capitalize()
        ending = ("." if index % 3 else f', BP {rng.integers(90, 180)}/{rng.integers(50, 100)} on [**2150-{index % 12 + 1}-3**].')
        quote = ' "stable"' if index % 7 == 0 else ""
        pool.append(body + quote + ending + ("\n" if index % 5 == 0 else " "))
    return pool


def note_text(rng: np.random.Generator, pool: list[str], sentences: int) -> str:
    return "".join(pool[i] for i in rng.integers(0, len(pool), size=sentences))


def code_pools(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Undotted ICD-9-like diagnosis (numeric, V and E) and procedure codes, leading zeros included."""
    numeric = [f"{n:04d}" for n in rng.choice(10_000, size=1_600, replace=False)]
    v_codes = [f"V{n:04d}" for n in rng.choice(10_000, size=250, replace=False)]
    e_codes = [f"E{n:04d}" for n in rng.choice(10_000, size=150, replace=False)]
    procedures = [f"{n:04d}" for n in rng.choice(10_000, size=800, replace=False)]
    return np.array(numeric + v_codes + e_codes), np.array(procedures)


def zipf_choice(rng: np.random.Generator, pool: np.ndarray, size: int) -> np.ndarray:
    """Codes drawn with a long tail (rank r has weight 1/r), like real ICD frequencies."""
    weights = 1.0 / np.arange(1, len(pool) + 1)
    return rng.choice(pool, size=size, p=weights / weights.sum())


def write_synthetic_mimic3(root: Path, notes: int, seed: int) -> tuple[int, int]:
    """Write NOTEEVENTS/DIAGNOSES_ICD/PROCEDURES_ICD.csv and splits/ for about `notes` notes."""
    rng = np.random.default_rng(seed)
    pool = sentence_pool(rng)
    diagnosis_pool, procedure_pool = code_pools(rng)
    admissions = int(notes / NOTES_PER_ADMISSION)
    hadm_ids = 100_000 + np.arange(admissions)
    root.mkdir(parents=True, exist_ok=True)
    code_frequency: Counter = Counter()
    codes_of: dict[int, set[str]] = {}
    written = 0
    with open(root / "NOTEEVENTS.csv", "w", newline="") as notes_file, open(root / "DIAGNOSES_ICD.csv", "w", newline="") as diag_file, open(
        root / "PROCEDURES_ICD.csv", "w", newline=""
    ) as proc_file:
        note_rows, diag_rows, proc_rows = (csv.writer(f, quoting=csv.QUOTE_NONNUMERIC) for f in (notes_file, diag_file, proc_file))
        note_rows.writerow(NOTE_HEADER)
        diag_rows.writerow(CODE_HEADER)
        proc_rows.writerow(CODE_HEADER)
        for index, hadm in enumerate(tqdm(hadm_ids.tolist(), desc=f"synthetic {notes} notes", unit="adm", disable=None)):
            day = f"2150-{index % 12 + 1:02d}-{index % 28 + 1:02d}"
            batch = [("Discharge summary", "Report", REPORT_SENTENCES)]
            if rng.random() < ADDENDUM_RATE:
                batch.append(("Discharge summary", "Addendum", ADDENDUM_SENTENCES))
            if rng.random() < OTHER_NOTE_RATE:
                batch.append((OTHER_CATEGORIES[index % len(OTHER_CATEGORIES)], "Report", OTHER_SENTENCES))
            for category, description, sentences in batch:
                written += 1
                text = note_text(rng, pool, sentences)
                note_rows.writerow([written, index, hadm, day, "", "", category, description, "", "", text])
            diagnoses = set(zipf_choice(rng, diagnosis_pool, DIAGNOSES_PER_ADMISSION).tolist())
            procedures = set(zipf_choice(rng, procedure_pool, PROCEDURES_PER_ADMISSION).tolist())
            for seq, code in enumerate(sorted(diagnoses), start=1):
                diag_rows.writerow([written * 100 + seq, index, hadm, seq, code])
            for seq, code in enumerate(sorted(procedures), start=1):
                proc_rows.writerow([written * 100 + seq, index, hadm, seq, code])
            labels = {f"d{c}" for c in diagnoses} | {f"p{c}" for c in procedures}
            codes_of[hadm] = labels
            code_frequency.update(labels)
    write_split_lists(root / "splits", hadm_ids, codes_of, code_frequency, rng)
    return written, admissions


def dotted(label: str) -> str:
    """Dotted form of a synthetic label ('d' + diagnosis or 'p' + procedure code)."""
    kind, code = label[0], label[1:]
    return dot_procedure(code) if kind == "p" else dot_diagnosis(code)


def write_split_lists(folder: Path, hadm_ids: np.ndarray, codes_of: dict, frequency: Counter, rng: np.random.Generator) -> None:
    """Full lists: 85/5/7% of admissions (3% in none); 50 lists: those with a top-50 code."""
    folder.mkdir(parents=True, exist_ok=True)
    shuffled = rng.permutation(hadm_ids)
    cuts = (np.array([0.85, 0.90, 0.97]) * len(shuffled)).astype(int)
    full = {"train": shuffled[: cuts[0]], "dev": shuffled[cuts[0] : cuts[1]], "test": shuffled[cuts[1] : cuts[2]]}
    top50 = [label for label, _ in sorted(frequency.items(), key=lambda kv: (-kv[1], kv[0]))[:50]]
    top_set = set(top50)
    for split, ids in full.items():
        (folder / f"{split}_full_hadm_ids.csv").write_text("".join(f"{h}\n" for h in ids.tolist()))
        fifty = [h for h in ids.tolist() if codes_of[h] & top_set]
        (folder / f"{split}_50_hadm_ids.csv").write_text("".join(f"{h}\n" for h in fifty))
    (folder / "top50_code_list.txt").write_text("".join(f"{dotted(label)}\n" for label in top50))


def run_prepare(root: Path, out: Path, chunk_rows: int, log_path: Path) -> tuple[float, float]:
    """Run prepare-mimic in a child process; return (wall seconds, peak RSS in MB)."""
    command = [
        sys.executable, "-m", "mscl", "prepare-mimic", "--version", "mimic3", "--root", str(root),
        "--splits", str(root / "splits"), "--out-full", str(out / "full"), "--out-50", str(out / "50"),
        "--chunk-rows", str(chunk_rows),
    ]  # fmt: skip
    return run_measured(command, log_path)


def input_megabytes(root: Path) -> float:
    return sum((root / f"{name}.csv").stat().st_size for name in ("NOTEEVENTS", "DIAGNOSES_ICD", "PROCEDURES_ICD")) / 1e6


def measure(workdir: Path, scale: int, base_notes: int, chunk_rows: int, seed: int) -> Measurement:
    root = workdir / f"x{scale}"
    notes, admissions = write_synthetic_mimic3(root, base_notes * scale, seed)
    wall_s, peak_rss_mb = run_prepare(root, workdir / f"out_x{scale}", chunk_rows, workdir / f"prepare_x{scale}.log")
    measurement = Measurement(scale, notes, admissions, input_megabytes(root), wall_s, peak_rss_mb)
    shutil.rmtree(root)  # keep disk use to one size at a time
    return measurement


def format_table(measurements: list[Measurement]) -> str:
    lines = [
        "| size | notes | admissions | input MB | wall s | MB/s | peak RSS MB |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for m in measurements:
        lines.append(
            f"| {m.scale}x | {m.notes:,} | {m.admissions:,} | {m.input_mb:.1f} | {m.wall_s:.1f} | {m.mb_per_s:.1f} | {m.peak_rss_mb:.0f} |"
        )
    if len(measurements) > 1:
        first, last = measurements[0], measurements[-1]
        lines.append("")
        lines.append(f"peak RSS {last.scale}x/{first.scale}x: {last.peak_rss_mb / first.peak_rss_mb:.2f} (input {last.input_mb / first.input_mb:.1f}x)")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = cli.parse_args("bench preprocess", argv)
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="mscl-bench-preprocess-"))
    workdir.mkdir(parents=True, exist_ok=True)
    try:
        measurements = [measure(workdir, scale, args.notes, args.chunk_rows, args.seed) for scale in args.scales]
    finally:
        if args.workdir is None:
            shutil.rmtree(workdir, ignore_errors=True)
    print(format_table(measurements))
    return 0
