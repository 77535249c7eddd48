"""Every command's defaults and choices, each written once: the parsers in `mscl.cli` offer
them and the commands' modules fall back to them.

Standard library only, and nothing of mscl: `--help` prints these defaults without importing
the command's module (and torch or pandas with it).
"""

from __future__ import annotations

from pathlib import Path

# numpy's legacy seeding (np.random.seed, which the runs seed too) takes 0 .. 2**32 - 1.
MAX_SEED = 2**32 - 1

# pretrain --stop-after-epoch: the exit code of a deliberately interrupted run.
EXIT_STOPPED = 3

# ------------------------------------------------------------------------ preprocessing

# Image parsers: a missing or undecodable image is an error, or is dropped and counted; by
# default an error, except for NUS-WIDE, many of whose images are no longer downloadable.
MISSING_POLICIES = ("error", "drop")
MISSING_IMAGES_DEFAULTS = {"coco": "error", "voc": "error", "nuswide": "drop"}

MIMIC_LABEL_SPACES = ("train", "union")
MIMIC_CHUNK_ROWS = 5_000  # notes per chunk: ~10-50 MB of text for MIMIC discharge summaries
MIMIC_DOWNLOAD_TIMEOUT_S = 60.0  # per split-list file

VOC_DIFFICULT_POLICIES = ("include", "exclude")

NUSWIDE_FRACTIONS = (0.6, 0.2, 0.2)

AAPD_POLICIES = ("resplit", "original")

# The paper's AAPD split sizes in thousands of documents (Table "Statistics of datasets").
AAPD_PAPER_COUNTS_K = (37.8, 6.7, 11.3)
AAPD_FRACTIONS = tuple(count / sum(AAPD_PAPER_COUNTS_K) for count in AAPD_PAPER_COUNTS_K)

YEAST_POLICIES = ("mulan", "seeded")
YEAST_VAL_FRACTION = 0.2

DEBTAGS_MIN_COUNT = 50
DEBTAGS_EXCLUDED_FACETS = ("role", "special", "made-of")
DEBTAGS_FRACTIONS = (0.7, 0.1, 0.2)

FASHION_MNIST_ROOT = Path("/usr/share/datasets/fashion-mnist")
FASHION_MNIST_GRID = 2  # cells per canvas side
FASHION_MNIST_CANVAS_SIZE = 56
FASHION_MNIST_MAX_ITEMS = FASHION_MNIST_GRID * FASHION_MNIST_GRID
FASHION_MNIST_VAL_FRACTION = 0.1
FASHION_MNIST_CLASS_EXPONENT = 1.0

# `prepare-csv`: one CSV/TSV file of one's own (mscl.data.csv_source).
CSV_FRACTIONS = (0.7, 0.15, 0.15)  # the seeded split when the file has no split column
CSV_LABEL_SEPARATOR = ";"  # what joins the labels of a row in the labels column
CSV_MODALITIES = ("text", "image")

EMBED_BATCH_SIZE = 64  # texts per batch of `embed-text`

# ----------------------------------------------------------------------------- training

CACHE_PREFIX_BATCH_SIZE = 64  # texts per prefix batch of `cache-prefix`

# ------------------------------------------------------------------------- claim check

CLAIM_REFERENCE = "simdissim"
CLAIM_ALPHA = 0.05
CLAIM_MARGIN = 0.01  # the equivalence margin (fraction): 1 point, declared in the protocol

# -------------------------------------------------------------------------- benchmarks

# The label tensors `bench losses` times (the keys of mscl.bench.losses.LABEL_FORMS; a test checks).
LABEL_FORM_NAMES = ("dense", "csr", "dense-bool")
# What `bench gpu` measures: its model cases (mscl.bench.gpu.case_specs), then the loss's label
# work and the JPEG decoding.
GPU_MODEL_CASES = ("resnet50", "resnet50-cpu-decode", "roberta-base", "llama-lora", "plm-icd")
GPU_BENCH_CASES = (*GPU_MODEL_CASES, "losses", "decode")
