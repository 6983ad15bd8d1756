"""The ``vlm`` built-in processor: each page read by a vision-language model on an OpenAI-compatible endpoint, as olmocr's
pipeline reads it, and ``auto``, which sends the model only the pages the CPU ``ocr`` path cannot read well.

It needs the ``vlm`` extra (the ``ocr`` extra's packages: the pages are opened and rendered by ocr's decoder, and a page
the model cannot read falls back to ocr's CPU path). ``settings`` holds its knobs; ``query`` builds a page's request as
olmocr's ``build_page_query`` does; ``answer`` parses the model's answer as olmocr's ``FrontMatterParser`` does;
``client`` talks to the endpoint (retries, backoff, the breaker); ``dolma`` builds olmocr's Dolma document; ``processor``
keeps many pages in flight. This ``__init__`` imports nothing of the extra.
"""
