"""SAM 3 ("Segment Anything with Concepts", Meta, arXiv 2511.16719) as a concept-segmentation model
on transformers' port (Sam3VideoModel, its detector Sam3Model, Sam3Processor, Sam3VideoProcessor):
adapter.py (the Adapter a run instantiates), config.py (its Hydra schema).
"""
