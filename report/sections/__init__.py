"""The report's sections, a module each: order.py holds the document order, cells.py their shared cell formats."""

from report.sections.inputs import Blocks, ReportInputs
from report.sections.latency import extrapolation_blocks
from report.sections.order import SECTIONS, build_document
from report.sections.quality import BERTSCORE_WINDOW_NOTE

__all__ = ["BERTSCORE_WINDOW_NOTE", "SECTIONS", "Blocks", "ReportInputs", "build_document", "extrapolation_blocks"]
