# The workflow lives in workflow/Snakefile (the Snakemake workflow catalog's layout); this file
# lets `snakemake` run it from the repository root. Both plan the same jobs.


include: "workflow/Snakefile"
