"""Opt-in kits built on the kernel and the stores (DESIGN §12): bounded child runs
(:mod:`fevex.kits.children`), durable professional tasks (:mod:`fevex.kits.tasks`),
reflection over run history (:mod:`fevex.kits.reflection`), agent families with
branches and promotion (:mod:`fevex.kits.family`) and knowledge publication
(:mod:`fevex.kits.publication`).

Nothing here is imported by ``import fevex``; each kit is imported by its own name.
"""
