"""Metric functions, units and protocols. Importing the package defines every built-in kind of
per-sample values (rvt_bench.core.records.UnitValues), so any score record of the shipped units
reads back typed wherever rvt_bench.metrics is imported."""
from rvt_bench.metrics.protocols import grefcoco as _grefcoco  # noqa: F401  (GRefCOCOValues)
from rvt_bench.metrics.protocols import gseval as _gseval  # noqa: F401  (GSEvalValues)
from rvt_bench.metrics.protocols import long_rvos as _long_rvos  # noqa: F401  (LongRVOSValues)
from rvt_bench.metrics.protocols import mevis as _mevis  # noqa: F401  (MeViSValues)
from rvt_bench.metrics.protocols import ref_davis17_referformer as _ref_davis17_referformer  # noqa: F401  (ReferFormerValues)
from rvt_bench.metrics.protocols import ref_sav as _ref_sav  # noqa: F401  (RefSAVValues)
from rvt_bench.metrics.protocols import revos as _revos  # noqa: F401  (ReVOSValues)
from rvt_bench.metrics.protocols import saco_gold as _saco_gold  # noqa: F401  (SACoGoldValues)
from rvt_bench.metrics.protocols import server as _server  # noqa: F401  (ServerValues)
from rvt_bench.metrics.units import box_iou as _box_iou  # noqa: F401  (BoxValues)
from rvt_bench.metrics.units import captions as _captions  # noqa: F401  (TextValues)
from rvt_bench.metrics.units import lisa_iou as _lisa_iou  # noqa: F401  (MaskIoUValues)
from rvt_bench.metrics.units import video_jf as _video_jf  # noqa: F401  (VideoJFValues)
