from .schema import Config, register_configs

__all__ = ["Config", "register_configs"]
