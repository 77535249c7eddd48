"""Contrastive pretraining (`python -m mscl pretrain`) and the linear probe (`python -m mscl probe`).

Modules: `spec` (the validated run spec), `data` (manifest splits, views, loaders),
`runtime` (device, seeding, versions, checkpoint I/O), `pretrain` and `probe` (the commands),
`distributed` (pretraining on several processes, DDP) and `launch` (how the workflow starts it).
See docs/training.md.
"""
