"""SAM 3 Agent (facebookresearch/sam3 sam3/agent/, arXiv 2511.16719): an MLLM that calls SAM 3 as a
tool in a loop until it selects masks or reports none. adapter.py (the Adapter), loop.py (the
repository's loop), prompts.py (its system prompts, read from the user's sam3, and its messages),
tool.py (SAM 3 as segment_phrase), render.py (the images shown), funnel.py (the report).
"""
