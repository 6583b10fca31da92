"""The version of gpuprobe, in one place (read by the package, the CLI and every record)."""

__all__ = ["__version__"]

__version__ = "0.1.0"
