"""The ledger against PyTorch's own implementations (torch extra): DDP, FSDP2, HSDP,
DTensor tensor parallel, torch.distributed.pipelining and an expert all-to-all with a
real router, measured at the c10d dispatcher and, from the kernel's TCP counters, on
the wire; and the activation bytes a Llama layer saves for backward."""
