"""Typed errors a user can cause on the worker side; each message says how to fix it."""

from __future__ import annotations


class WorkerError(Exception):
    """Base of the errors a spec or a machine can cause; the run becomes `status: error` with this message."""


class SpecMismatchError(WorkerError):
    """The spec asks for something this machine cannot give (a kernel that is not installed, an unknown dtype)."""


class CheckpointFilesError(WorkerError):
    """A checkpoint's files are missing or wrong. Nothing was measured, so the failed run is no result: its
    artifact says so (`input_error`) and a resume reruns it, so a fixed file is picked up without --retry-failed."""


class ModelNotAvailableError(CheckpointFilesError):
    """A checkpoint that is neither a local directory nor in the HF cache (and cannot be downloaded)."""


class CheckpointFormatError(CheckpointFilesError):
    """A checkpoint whose files or config do not match what the loader supports, or each other."""


class PromptsError(WorkerError):
    """The prompt dataset is missing, unreadable or has too few passages long enough for the run."""
