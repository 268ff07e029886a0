"""Distributed scenarios (DDP, ZeRO, FSDP2, TP/SP, DTensor, 2-D meshes, pipelining, functional
collectives, a tiny Llama under FSDP2) run in spawned ranks on the device under test and compared with the
same training run in one CPU process. See ``docs/distributed.md``."""
