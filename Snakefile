# Reproduction pipeline for "Similarity-Dissimilarity Loss for Multi-label Supervised Contrastive
# Learning" (TMLR 2026): `snakemake` from the repository root. The same workflow as
# workflow/Snakefile (the catalog's entry point): both include workflow/main.smk, then name the
# default target. See README.md.


include: "workflow/main.smk"


rule all:
    default_target: True
    input:
        all_targets(),
