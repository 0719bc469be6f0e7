from .schema import Config

__all__ = ["Config"]
