"""Static files storage: WhiteNoise's compressed manifest storage (content-hashed names, gzip)."""

from __future__ import annotations

from whitenoise.storage import CompressedManifestStaticFilesStorage


class StaticFilesStorage(CompressedManifestStaticFilesStorage):
    """Hashed names from the manifest collectstatic writes. Without one (collectstatic never
    ran for this STATIC_ROOT: a test's subprocess, a checkout served before `make demo`),
    {% static %} gives plain names instead of failing every page; WhiteNoise then serves
    static/ through the finders (settings.WHITENOISE_USE_FINDERS)."""

    def stored_name(self, name: str) -> str:
        if not self.hashed_files:
            return name
        return super().stored_name(name)
