"""Typed errors a user can cause on the worker side; each message says how to fix it."""

from __future__ import annotations


class WorkerError(Exception):
    """Base of the errors a spec or a machine can cause; the run becomes `status: error` with this message."""


class SpecMismatchError(WorkerError):
    """The spec asks for something this machine cannot give (a kernel that is not installed, an unknown dtype)."""


class ModelNotAvailableError(WorkerError):
    """A checkpoint that is neither a local directory nor in the HF cache (and cannot be downloaded)."""


class CheckpointFormatError(WorkerError):
    """A checkpoint whose files or config do not match what the loader supports."""


class PromptsError(WorkerError):
    """The prompt dataset is missing, unreadable or has too few passages long enough for the run."""
