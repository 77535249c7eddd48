# The embedded default: small datasets generated in the real raw formats (mscl.demo).


rule make_demo:
    output:
        directory(f"{RAW}/demo/{{kind}}"),
    log:
        f"{LOGS}/demo/{{kind}}.log",
    conda:
        CONDA_ENV
    params:
        seed=config["seed"],
        samples=demo_samples_option,
    shell:
        "python -m mscl make-demo {wildcards.kind} --out {output} --seed {params.seed} {params.samples} > {log} 2>&1"
