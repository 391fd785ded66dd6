"""One module per CLI subcommand: ``add_arguments(parser)`` and ``main(args) -> int``."""


def add_dtype_argument(parser) -> None:
    """--dtype, common to the commands that run the network (run, train, grid, resources build)."""
    from bench.encoder import DTYPES

    parser.add_argument("--dtype", choices=DTYPES, default="auto",
                        help="precision of every forward pass (weights stay fp32). auto: bf16 autocast where the "
                             "hardware runs bf16 natively (CUDA with bf16, CPUs with AMX or AVX-512-BF16), fp16 on "
                             "other CUDA devices, else fp32. fp16: CUDA only")
