"""Where every hardware figure of ``ledger.system`` comes from: one entry per preset and
figure kind (the chip's peaks and memory, its board power, its system's links, hosts and
NICs), each naming the datasheet or the MLPerf system description it is read from."""

# Where each preset's peaks come from (dense, no sparsity: the datasheets' sparse FP8
# figures are twice these). The A100 has no FP8 tensor cores, so its fp8 peak is 0. SMs:
# A100 108, H100 SXM / H800 / H200 132, B200 148 (NVIDIA architecture whitepapers),
# MI300X 304 compute units (AMD CDNA 3 whitepaper); the generation picks NCCL's tables
# (RCCL's, for the MI300X, are not modelled: it takes Hopper's).
GPU_SOURCES = {
    "a100-40gb": "NVIDIA A100 Tensor Core GPU datasheet: BF16 312 TFLOP/s dense, no FP8; "
                 "40 GB HBM2 1,555 GB/s",
    "a100-80gb": "NVIDIA A100 datasheet: BF16 312 TFLOP/s, no FP8; 80 GB HBM2e 2,039 GB/s",
    "h100-sxm": "NVIDIA H100 Tensor Core GPU datasheet (SXM): BF16 1,979 / FP8 3,958 "
                "TFLOP/s with sparsity, i.e. 989 / 1,979 dense; 80 GB HBM3 3.35 TB/s; "
                "NVLink 900 GB/s (both directions). Capacity as nvidia-smi reads it "
                "(memory.total), 81,559 MiB = 79.65 GiB ('NVIDIA H100 80GB HBM3 ... 0MiB / "
                "81559MiB': NVIDIA/nccl issue #1264; modal-labs/modal-client PR #2797)",
    "h800": "NVIDIA H800 (SXM): the H100 SXM's compute and HBM (BF16 989, FP8 1,979 "
            "TFLOP/s dense; 80 GB, 3.35 TB/s) with export-limited NVLink, 400 GB/s on the "
            "datasheet in the convention of the H100's 900 GB/s (both directions): 200 GB/s "
            "per direction. DeepSeek-V3 report (arXiv:2412.19437) sec. 3.1: 8 H800 per node "
            "over NVLink/NVSwitch, InfiniBand between nodes; sec. 3.2.2: NVLink 160 GB/s, "
            "IB 50 GB/s per GPU (achieved: 0.8 x 200 GB/s, 400 Gb/s NICs)",
    "h100-96gb": "Meta Grand Teton H100 SXM: '96GB HBM2e with 2.4 TB/sec peak memory "
                 "bandwidth', 500 W (torchtitan docs/performance.md @d4c86e37, where its "
                 "measured peaks come from); torch reports 'NVIDIA H100 (0) with 95.04GiB' "
                 "(torchtitan commit ff3e9f59's log, 2024-04-10): that is its capacity here. "
                 "Compute as the H100 SXM datasheet's (the same GH100 SXM part; the docs say "
                 "its peak lies 'between SXM and NVL')",
    "h100-nvl": "NVIDIA H100 NVL datasheet: 94 GB HBM3 3.9 TB/s, BF16 1,671 / FP8 3,341 "
                "TFLOP/s with sparsity (835 / 1,671 dense); capacity as a driver reads it, "
                "99,961,274,368 B (fastfetch-cli/fastfetch issue #1658); a PCIe Gen5 card",
    "h200": "NVIDIA H200 datasheet: BF16 989 / FP8 1,979 TFLOP/s dense (half the sparse "
            "figures); 141 GB HBM3e 4.8 TB/s",
    "gh200": "NVIDIA GH200 Grace Hopper Superchip datasheet: the H100's compute (BF16 989 / FP8 1,979 "
             "TFLOP/s dense), 96 GB HBM3 4 TB/s; NVLink-C2C to the Grace CPU 900 GB/s (both "
             "directions, 7x PCIe Gen5) - 450 GB/s per direction (10 links x 45 GB/s, Hot "
             "Chips 34)",
    "b200": "NVIDIA DGX B200 / HGX B200 datasheet: FP4 9, FP8 4.5, BF16 2.25 PFLOP/s "
            "dense per GPU (144 / 72 / 36 with sparsity for 8); 180 GB HBM3e 8 TB/s; NVLink 5 "
            "1.8 TB/s (both directions)",
    "mi300x": "AMD Instinct MI300X datasheet: BF16 1,307.4 / FP8 2,614.9 TFLOP/s dense; "
              "192 GB HBM3 5.3 TB/s",
    "h20": "NVIDIA HGX H20 (the export-limited GH100 part; NVIDIA publishes no datasheet, "
           "the figures are the product brief's as reported, e.g. SemiAnalysis 2023-11): "
           "BF16 148 / FP8 296 TFLOP/s dense, 96 GB HBM3 4.0 TB/s, 78 SMs, NVLink 900 GB/s "
           "(both directions), 400 W",
    "b300": "NVIDIA HGX B300 datasheet (8 GPUs): FP4 144 | 105 PFLOP/s (sparse | dense), "
            "FP8 72 and BF16 36 PFLOP/s with sparsity - per GPU dense FP4 13.125, FP8 4.5, BF16 "
            "2.25 PFLOP/s; HBM3e 8 TB/s; NVLink 5 1.8 TB/s (both directions). Capacity as "
            "NVIDIA's MLPerf DGX B300 system gives it, 270 GB (mlcommons/inference_results_v6.1 "
            "@ 5174fca8 closed/NVIDIA/systems/B300-SXM-270GBx8_TRT.json), taken as GiB as the "
            "B200's 180 GB is; 160 SMs (NVIDIA, 'Inside NVIDIA Blackwell Ultra', 2025)",
    "gb200": "NVIDIA GB200 NVL72 datasheet: FP4 1,440 / FP8 720 / BF16 360 PFLOP/s with "
             "sparsity for 72 GPUs - per GPU dense FP4 10, FP8 5, BF16 2.5 PFLOP/s (the GB200 "
             "part at 1,200 W); 576 TB/s HBM3e over 72 GPUs, 8 TB/s each; capacity as "
             "torch reads it on NVIDIA's MLPerf system, 189471 MiB (mlcommons/"
             "training_results_v5.1 @ 4da2d1cd NVIDIA/systems/tyche_ngpu72_ngc25.09_nemo.json)",
    "gb300": "NVIDIA GB300 NVL72 datasheet: FP4 1,440 | 1,080 PFLOP/s (sparse | dense) for 72 "
             "GPUs - per GPU dense FP4 15, FP8 5, BF16 2.5 PFLOP/s (FP8 720 and BF16 360 with "
             "sparsity); 576 TB/s HBM3e, 8 TB/s each; capacity 284208 MiB (mlcommons/"
             "training_results_v5.1 @ 4da2d1cd NVIDIA/systems/theia_ngpu72_ngc25.09_nemo.json); "
             "160 SMs (Blackwell Ultra)",
    "mi325x": "AMD Instinct MI325X datasheet: BF16 1,307.4 / FP8 2,614.9 TFLOP/s dense (the "
              "MI300X's CDNA 3 compute, 304 CUs); 256 GB HBM3E 6 TB/s; 1,000 W",
    "mi355x": "AMD Instinct MI355X datasheet: BF16 2,516.6 / FP8 5,033.2 / MXFP4 10,066.3 "
              "TFLOP/s dense (rounded there to 2.5 / 5 / 10 PFLOPS): 256 CDNA 4 CUs x 2.4 GHz "
              "x 4,096 / 8,192 / 16,384 FLOPs a CU a clock (ISSCC 2026: 8,192 FP8); 288 GB "
              "HBM3E 8 TB/s; 1,400 W. Capacity as AMD's MLPerf "
              "system names it (mlcommons/inference_results_v6.1 @ 5174fca8 closed/AMD/"
              "systems/8xMI355X_2xEPYC_9575F.json: 'AMD Instinct MI355X 288GB HBM3e')",
    "l40s": "NVIDIA L40S datasheet: BF16 362.05 / FP8 733 TFLOP/s dense (733 / 1,466 with "
            "sparsity); 48 GB GDDR6 864 GB/s; 350 W; 142 SMs; PCIe Gen4 x16, no NVLink. "
            "Ada (sm_89): NCCL's Ampere tables",
    "l4": "NVIDIA L4 datasheet: BF16 121 / FP8 242.5 TFLOP/s dense (242 / 485 with "
          "sparsity); 24 GB GDDR6 300 GB/s; 72 W; 58 SMs; PCIe Gen4 x16, no NVLink",
    "rtx-pro-6000": "NVIDIA RTX PRO 6000 Blackwell Server Edition datasheet: 'up to 4 PFLOPS' FP4 "
                    "AI performance, with sparsity - dense FP4 2 PFLOP/s, and FP8 and BF16 each "
                    "half the format below it (the Blackwell tensor core's ratio: 1 and 0.5 "
                    "PFLOP/s); 96 GB GDDR7 1,597 GB/s; 600 W; 188 SMs; PCIe Gen5 x16, no NVLink",
}



# Board power: the rated TDP / TGP a GPU-hour is counted at, as Meta's and BigScience's
# energy figures count it (a whole run's energy, ledger.run).
# The total CUDA reports (``ledger.system.chips.CUDA_TOTAL_BYTES``): cudaMemGetInfo's,
# which torch.cuda.mem_get_info returns, vLLM's budget reads and PyTorch's out-of-memory
# message calls the "total capacity".
CUDA_TOTAL_SOURCES = {
    "h100-sxm": "79.18 GiB: vLLM's 'Free memory on device (78.57/79.18 GiB) on startup' in 7 "
                "start-ups on H100 (llm-d/llm-d-benchmark 4f4d44943c, config_explorer/"
                "empirical-vllm-memory-results.md); PyTorch's 'GPU 0 has a total capacity of "
                "79.18 GiB' on one H100 80GB HBM3 (a public SFT log; 79.21 GiB on another "
                "node's driver). nvidia-smi's 79.65 GiB less what the driver keeps",
}


POWER_SOURCES = {
    "a100-40gb": "400 W (A100 SXM4): Llama 2 model card, meta-llama/llama-models @ a9c89c47 "
                 "models/llama2/MODEL_CARD.md L43-50 (A100-80GB rows at 400 W)",
    "a100-80gb": "400 W (A100 SXM4): Llama 2 model card L43-50 (rows at 400 W); BLOOM's "
                 "433,196 kWh = 1,082,990 GPU-hours x 0.4 kW (Luccioni et al. 2022, "
                 "arXiv:2211.02001)",
    "h100-sxm": "700 W: Llama 3 (arXiv:2407.21783) sec. 3.3.1 ('each running at 700W TDP'); "
                "Llama 3.1 model card L104 ('H100-80GB (TDP of 700W)'); datasheet 'up to 700W'",
    "h100-96gb": "500 W: Meta's Grand Teton H100 as torchtitan docs/performance.md @d4c86e37 "
                 "line 5 describes it (96GB HBM2e, 500 W)",
    "h100-nvl": "400 W: NVIDIA H100 datasheet, NVL column ('350-400W (configurable)'), at its "
                "maximum",
    "h800": "assumed the H100 SXM board's 700 W (the same SXM5 module; no vendor figure "
            "found, DeepSeek publishes none)",
    "h200": "700 W: NVIDIA's MLPerf system description, mlcommons/inference_results_v4.1 @ "
            "a2f5d66d closed/NVIDIA/systems/H200-SXM-141GBx8_TRT.json ('H200 TGP 700W')",
    "gh200": "1000 W: the superchip module's maximum, Grace CPU and LPDDR5X included "
             "(configurable 450-1000 W; ServeTheHome's report of NVIDIA's figure, secondary)",
    "b200": "1000 W: mlcommons/inference_results_v4.1 @ a2f5d66d closed/NVIDIA/systems/"
            "B200-SXM-180GBx1_TRT.json ('B200 TGP 1000W')",
    "mi300x": "750 W: AMD's MLPerf system, mlcommons/inference_results_v4.1 @ a2f5d66d "
              "closed/AMD/systems/8xMI300X_2xEPYC-9374F.json ('MI300X-NPS1-SPX-192GB-750W')",
    "h20": "400 W: the HGX H20 product brief as reported (no NVIDIA datasheet)",
    "b300": "1100 W: mlcommons/inference_results_v6.1 @ 5174fca8 closed/NVIDIA/systems/"
            "B300-SXM-270GBx8_TRT.json ('B300 TGP 1100W')",
    "gb200": "1200 W: ykamiset/inference_results_v5.1 (MLPerf v5.1) @ e9ccad4d closed/NVIDIA/"
             "systems/GB200-NVL72_GB200-186GB_aarch64x72_TRT.json ('GB200 TGP 1200W')",
    "gb300": "1400 W: ykamiset/inference_results_v5.1 @ e9ccad4d closed/NVIDIA/systems/"
             "GB300-NVL72_GB300-288GB_aarch64x72_TRT.json ('GB300 TGP 1400W')",
    "mi325x": "1000 W: AMD Instinct MI325X datasheet (typical board power)",
    "mi355x": "1400 W: AMD Instinct MI355X datasheet (total board power, liquid-cooled)",
    "l40s": "350 W: NVIDIA L40S datasheet (max power consumption)",
    "l4": "72 W: NVIDIA L4 datasheet (max thermal design power)",
    "rtx-pro-6000": "600 W: NVIDIA RTX PRO 6000 Blackwell Server Edition (max, configurable "
                    "400-600 W)",
}


# Each preset's usual system (ledger.system.SYSTEMS): GPUs per host and per scale-up domain,
# as the vendor's MLPerf system description of such a host names them where one exists
# (host memory, NICs and their rate, host link), else its datasheet (marked assumed where
# neither says);
# the scale-up link per GPU (one direction: the datasheets' NVLink figures count both),
# NICs per host and their rate, the GPU <-> CPU link, the host's CPU memory, and NVLink
# SHARP (NCCL's NVLS: NVSwitch systems of Hopper and later, src/graph/tuning.cc's
# nvlsEfficiency). PCIe per direction: Gen4 x16 31.5 GB/s (16 GT/s x 16 x 128/130), Gen5
# x16 64 GB/s ("PCIe Gen5 128GB/s" both ways on the H100 datasheet).
_H200_HOST = ("host: NVIDIA's 8-GPU H200 MLPerf system, mlcommons/inference_results_v4.1 @ "
              "a2f5d66d closed/NVIDIA/systems/H200-SXM-141GBx8_TRT.json ('2 TB', '32x 64GB', "
              "'PCIe Gen5 x16'): 256 GiB a GPU")
LINK_SOURCES = {
    "a100-40gb": "NVLink 3 600 GB/s (both directions) in an 8-GPU HGX; one HDR 200 Gb/s NIC "
                 "per GPU (Selene-class DGX A100); PCIe Gen4 x16; " + _H200_HOST + " (assumed)",
    "a100-80gb": "as a100-40gb: NVLink 3 300 GB/s a direction, 8 x HDR 200 Gb/s, PCIe Gen4",
    "h100-sxm": "NVLink 4 900 GB/s (both directions) over NVSwitch in an 8-GPU HGX, NVLS; one "
                "NDR 400 Gb/s NIC per GPU (DGX H100: 8 x ConnectX-7); PCIe Gen5; " + _H200_HOST,
    "h800": "NVLink 400 GB/s (both directions, export-limited; DeepSeek-V3 report sec. 3.1: "
            "8 per node over NVLink/NVSwitch, IB 400 Gb/s per GPU); PCIe Gen5",
    "h100-96gb": "Grand Teton: an 8-GPU HGX H100 board (NVLink 4, NVSwitch), 400 Gb/s per GPU",
    "h100-nvl": "NVLink bridges 600 GB/s between a pair (both directions), no NVSwitch; "
                "400 Gb/s per GPU; PCIe Gen5",
    "h200": "HGX H200: NVLink 4 900 GB/s over NVSwitch (NVLS), 8 x 400 Gb/s; " + _H200_HOST,
    "h20": "HGX H20: NVLink 900 GB/s (both directions) over NVSwitch, NVLS; 400 Gb/s per GPU "
           "and PCIe Gen5 as the HGX H100 (assumed: no H20 system file found)",
    "gh200": "NVLink-C2C 450 GB/s a direction to the Grace CPU; up to 480 GB LPDDR5X per "
             "superchip (GH200 product brief); 8 per node and 400 Gb/s per GPU as the H100 "
             "(assumed: CSCS Alps' nodes carry 128 GB each - set host_memory_GiB)",
    "b200": "HGX B200: NVLink 5 1.8 TB/s (both directions) over NVSwitch, NVLS; "
            "mlcommons/inference_results_v6.0 closed/Nebius/systems/nebius_b200_n1.json: "
            "'8x ConnectX-7 IB NDR 400Gb/s', 'PCIe Gen5 x16', 32 x 64GB host memory",
    "b300": "DGX B300: NVLink 5 1.8 TB/s (both directions), '18x 5th Gen NVLink, 14.4 TB/s "
            "aggregated' over NVSwitch, 'PCIe Gen5 x16', host '2 TB' of '32x 64GB' "
            "(mlcommons/inference_results_v6.1 @ 5174fca8 closed/NVIDIA/systems/"
            "B300-SXM-270GBx8_TRT.json), whose '10x 400Gbe Infiniband' give one 400 Gb/s "
            "NIC per GPU (8 of the 10 on the GPUs' rail): NICs as NVIDIA's own MLPerf host "
            "runs them, the rule of every NVIDIA preset here. The DGX B300 datasheet's "
            "ConnectX-8 can run 800 Gb/s on an XDR fabric: inter_GBps = 100 in a --system file",
    "gb200": "GB200 NVL72: one NVLink 5 domain of 72 GPUs (130 TB/s = 72 x 1.8 TB/s, both "
             "directions) over 9 NVSwitch trays, NVLS, built from 18 hosts ('number_of_nodes': "
             "'18', 'accelerators_per_node': '4') with '4x ConnectX-7 IB NDR 400 Gb/s' each "
             "(mlcommons/training_results_v5.1 @ 4da2d1cd NVIDIA/systems/"
             "tyche_ngpu72_ngc25.09_nemo.json); host memory '960 GB' of LPDDR5X per 4-GPU "
             "host, 2 Grace CPUs (MLPerf v5.1 inference GB200-NVL72_GB200-186GB_aarch64x72_"
             "TRT.json; the training file's '1.7 TB' adds the 4 GPUs' HBM); GPU <-> CPU "
             "NVLink-C2C 900 GB/s (both directions) per Grace shared by its 2 GPUs: 225 GB/s "
             "a GPU a direction",
    "gb300": "GB300 NVL72: as gb200 (72-GPU NVLink 5 domain, 18 hosts of 4, 960 GB LPDDR5X a "
             "host, NVLink-C2C) with '4x ConnectX-8 IB XDR 800 Gb/s' per host (mlcommons/"
             "training_results_v5.1 @ 4da2d1cd NVIDIA/systems/theia_ngpu72_ngc25.09_nemo.json)",
    "mi300x": "Infinity Fabric: 7 links x 128 GB/s (both directions) to the other 7 GPUs of "
              "the 8-GPU platform, 448 GB/s a direction; one 400 Gb/s NIC per GPU; PCIe Gen5",
    "mi325x": "as mi300x (the same 8-GPU UBB 2.0 platform, 7 Infinity Fabric links x 128 "
              "GB/s); one 400 Gb/s NIC per GPU (assumed, as the MI300X)",
    "mi355x": "8-GPU platform, 7 Infinity Fabric links x 153.6 GB/s (both directions, AMD "
              "MI355X datasheet): 537.6 GB/s a direction; 'PCIe Gen 5 x16' and host '3.0 TB' "
              "of 24 x 128GB (mlcommons/inference_results_v6.1 @ 5174fca8 closed/AMD/systems/"
              "8xMI355X_2xEPYC_9575F.json); one 400 Gb/s NIC per GPU (AMD Pollara 400, "
              "assumed: that MLPerf host names only 10 GbE)",
    "l40s": "8 PCIe Gen4 x16 cards, no NVLink: GPU to GPU over PCIe; '2x 10Gbe' NICs and "
            "'1 TB' of '16x 64GB' host memory (ykamiset/inference_results_v5.1 @ e9ccad4d "
            "closed/NVIDIA/systems/backup_systems/L40Sx8_TRT.json) - a training cluster "
            "sets its own NICs in a --system file",
    "l4": "8 PCIe Gen4 x16 cards, no NVLink; one 100 Gb/s NIC per host and the H200 host's "
          "memory per GPU (assumed: no system file of an L4 cluster found)",
    "rtx-pro-6000": "8 PCIe Gen5 x16 cards, no NVLink (GPU to GPU over PCIe, 64 GB/s a "
                    "direction); NVIDIA RTX PRO Server's ConnectX-8 SuperNICs, 400 Gb/s per "
                    "GPU (assumed from the announcement: no system file found)",
}


# NCCL's all-to-all as measured (ledger.system.A2A): what Megatron's alltoall dispatcher
# issues, torch.distributed.all_to_all_single with uneven splits (megatron/core/
# tensor_parallel/mappings.py L424-465, called from transformer/moe/token_dispatcher.py
# L705-724 and L864-870 at NVIDIA/Megatron-LM d98e8a64dd), which NCCL runs as grouped sends
# and receives. busbw = algbw x (n - 1) / n, the bytes that leave the GPU (sjeaugey,
# NVIDIA/nccl-tests issue #130); the OCI figures are nccl-tests' out-of-place busbw at the
# largest size each table prints (oracle-quickstart/oci-gpu-quickstarts @ 6a0abdc7).
_OCI = "oracle-quickstart/oci-gpu-quickstarts @ 6a0abdc7 "
_NIC = ("between domains: 'Alltoall cannot aggregate the bandwidth of multiple NICs, so the "
        "performance you should see is the performance of a single NIC' (sjeaugey, NVIDIA/"
        "nccl-tests issue #267, 2024-11-19); over N domains busbw = N/(N-1) x a GPU's "
        "network rate (issue #130): 48 GB200 hosts in 3 NVL72 racks, 4 x 400 Gb/s RoCE a "
        "host, 62.49 GB/s busbw at 8 GiB, 41.66 of 50 GB/s a GPU (" + _OCI
        + "nvidia/GB200/README-GB200.md L340)")
_HOPPER_NVL = ("NVLink 4: '450GB/s is the line rate. With the protocol overhead (~20%) NCCL "
               "can get an effective NVLink bandwidth of 370GB/s, which you can observe as "
               "\"BusBw\" when running non-allreduce operations' (sjeaugey, NVIDIA/nccl-tests "
               "issue #212, 2024-05-06, 8 x H100)")
_HGX_B_NVL = ("NVLink 5: 8 x B300 in one HGX host, alltoall_perf 8 GiB, busbw 675.55 of 900 "
              "GB/s (" + _OCI + "nvidia/B300/README-B300.md L160, NCCL 2.28.9)")
A2A_SOURCES = {
    "h100-sxm": _HOPPER_NVL + "; " + _NIC,
    "h100-96gb": _HOPPER_NVL + " (the same HGX H100 board); " + _NIC,
    "h200": _HOPPER_NVL + " (HGX H200: the same NVLink 4 NVSwitch); " + _NIC,
    "h20": _HOPPER_NVL + " (HGX H20: the same NVLink 4 NVSwitch); " + _NIC,
    "b300": _HGX_B_NVL + "; " + _NIC,
    "b200": _HGX_B_NVL + ", taken for the HGX B200 (the same NVLink 5 NVSwitch; no B200 "
                         "table found); " + _NIC,
    "gb200": ("NVLink 5 across the rack: 64 GB200 of one NVL72 rack (16 hosts), alltoall_perf "
              "8 GiB, busbw 622.92 of 900 GB/s (" + _OCI + "nvidia/GB200/README-GB200.md L314; "
              "4 GPUs of one host 615.30 L268, 8 of 2 hosts 657.81 L300); " + _NIC),
    "gb300": ("NVLink 5 across the rack: 64 GB300 of one NVL72 rack (16 hosts), alltoall_perf "
              "16 GiB, busbw 666.92 of 900 GB/s (" + _OCI + "nvidia/GB300/README-GB300.md L348; "
              "4 GPUs 627.69 L293, 8 of 2 hosts 685.06 L322). Between racks its own table "
              "gives 47.67 GB/s busbw over 2 racks (L374), a quarter of the host's 8 x 400 "
              "Gb/s a GPU, unexplained and not taken: link_efficiency"),
}


# The flex dispatcher's kernels across NICs as their own benchmarks measure them
# (ledger.system.FLEX_INTER)
_LOGICAL = ("'logical' RDMA bytes: a token counted once per node its experts sit on, its "
            "own node included (deepseek-ai/DeepEP 2be0d4f8 tests/test_internode.py "
            "L58-61, L204, L244; hybrid-ep 94a9f8f6 tests/utils.py L671-683 'to align with "
            "the implementation in the DeepEP, we do not set the local node map to zeros', "
            "tests/test_hybrid_ep.py L350-355), under uniform routing: the NIC carries "
            "(N - 1)/N of them over N nodes")
FLEX_SOURCES = {
    "deepep": ("DeepEP normal kernels on H800 with a CX7 400 Gb/s NIC (~50 GB/s) a GPU, "
               "4096 tokens, hidden 7168, top-4 groups, top-8 of 256 experts, FP8 dispatch, "
               "BF16 combine: internode EP 16 43 / 43 GB/s (RDMA), EP 32 58 / 57, EP 64 "
               "51 / 50, intranode EP 8 153 / 158 GB/s (NVLink) (deepseek-ai/DeepEP "
               "dd758caf docs/legacy.md L19-26); " + _LOGICAL + ". EP 32 and 64 taken "
               "(the NIC the bottleneck; EP 16's NVLink forwarding is: 2 nodes, a token's "
               "~6.4 GPUs over H800's ~160 GB/s NVLink)"),
    "hybridep": ("HybridEP on H100, 4096 tokens, hidden 7168, top-8, 8 local experts, "
                 "uniform routing, kernel only, 8 SMs (its default across nodes: "
                 "deepseek-ai/DeepEP hybrid-ep 94a9f8f6 csrc/hybrid_ep/config.cuh L366-367), "
                 "BF16 dispatch / combine: EP 16 76.80 / 68.00 GB/s, EP 32 54.50 / 56.40, "
                 "EP 64 50.55 / 51.03 ('IB bandwidth', docs/README_Hybrid-EP.md L53-78 "
                 "there, the 8-SM rows L71, L74, L77; the torch-API columns beside them, "
                 "57.74 / 56.96, 46.54 / 50.68, 41.46 / 47.68, add a copy out of its buffer "
                 "and a sync, tests/test_hybrid_ep.py L357-362); " + _LOGICAL
                 + ". Inside an NVLink "
                 "domain (ledger.system.FLEX_INTRA): GB200, 4096 tokens, hidden 7168, top-8, "
                 "8 local experts, uniform routing, 32 SMs, kernel only, BF16 dispatch / "
                 "combine 'algorithm bandwidth' at 8 ranks 764.03 / 737.13 GB/s, 16 706.95 / "
                 "666.26, 24 665.97 / 639.80, 32 642.23 / 605.15, 36 632.31 / 596.99 "
                 "(README_Hybrid-EP.md L107-135, the 32-SM rows L127-135); algbw = a rank's "
                 "dispatched tokens x hidden x 2 B over the time (tests/test_hybrid_ep.py "
                 "L345 there), its own copies included; kernel time by Kineto (L396-401), "
                 "as Megatron-Core's Table 7 times 'communication latency only' (arXiv "
                 "2603.07685 v2 p.31). Taken for every NVLink: its one HGX figure, 8 x B200 "
                 "at 16 SMs, kernel only, 734.95 / 673.84 (L104 there), comes to 0.69 of "
                 "900 GB/s against the rack's 0.71; no Hopper figure is published"),
}


# Each system's host CPU (ledger.system.HOST_CPUS), which runs the framework's Python and
# the kernel launches (ledger.step.host): as the vendor's MLPerf system description names it
HOST_CPU_SOURCES = {
    "grace": "NVIDIA Grace, Arm Neoverse V2: GB200 NVL72 'host_processor_model_name': "
             "'Neoverse-V2', 2 a 4-GPU host of 72 cores (mlcommons/training_results_v5.1 @ "
             "4da2d1cd NVIDIA/systems/tyche_ngpu72_ngc25.09_nemo.json); GB300 NVL72 the same "
             "trays' Grace (theia_ngpu72_ngc25.09_nemo.json there); GH200: its Grace CPU "
             "(GH200 datasheet)",
    "x86": "every other preset: an x86 host - NVIDIA's DGX B300 MLPerf system 'Intel(R) "
           "Xeon(R) Platinum 8570', 2 of 56 cores (mlcommons/inference_results_v6.1 @ 5174fca8 "
           "closed/NVIDIA/systems/B300-SXM-270GBx8_TRT.json); DGX B200 2 Xeon Platinum 8570 "
           "(DGX B200 datasheet); DGX H100 2 Xeon Platinum 8480C",
}

# The fused attention core's measured rates (ledger.system.attention; the window kernel's
# source with the model facts: ledger.frameworks.model_sources)
ATTENTION_SOURCES = {
    "causal": "NVIDIA/cudnn-frontend benchmark/sdpa_benchmark_training/results/"
              "{h200,gb200,gb300}_919_only_cudnn/llama3.1_*.csv (cuDNN 9.19.1, BF16 and FP8, "
              "causal, 64 q / 8 kv heads, head dim 128; h200 and gb200 at df73764a, gb300 at "
              "afa9f7c0)",
    "head_dim_64": "NVIDIA/cudnn-frontend benchmark/sdpa_benchmark_training/results/"
                   "{h200,gb200,gb300}_919_only_cudnn/gpt_oss_*.csv at df73764a (cuDNN 9.19, "
                   "BF16 and FP8, 64 q / 8 kv heads, head dim 64, causal with a 1,024-key "
                   "window; configs/gpt_oss.py L14-18, L33-36; FLOPs as "
                   "benchmark_single_sdpa.py L952-995 counts them): the core of a model "
                   "whose head dim is at most 64 (its full-causal layers too, at the window "
                   "kernel's per-score rate: an assumption)",
    "fp8_hopper_head_dim": "NVIDIA/TransformerEngine 4220403e transformer_engine/common/"
                           "fused_attn/fused_attn.cpp L258-270 (FP8 fused attention trains "
                           "on sm_90 at d_qk = d_v = 128 only), pytorch/attention/"
                           "dot_product_attention/utils.py L538-564 (fp8_dpa disables the "
                           "other backends): elsewhere on Hopper the BF16 kernel's rate",
}
