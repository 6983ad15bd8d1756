"""The ``ocr`` built-in processor: the text of every PDF page and image, OCR'd where it has no text layer.

It needs the ``ocr`` extra (``pip install 's3wq[ocr]'``): RapidOCR on
onnxruntime, with the models RapidOCR's wheel ships; pypdfium2 renders the
pages and Pillow reads the images. ``processor`` holds the function;
``settings`` its knobs; ``engine`` loads RapidOCR once per process;
``decoder`` is the process, under a memory cap, that turns an input into
pages one at a time, and ``decoding`` the processor's side of it;
``time_shares`` shares a run's time out among a group's inputs;
``pages`` routes each page and ``layout`` reads its words in the order
they are printed.

This ``__init__`` imports nothing of the extra and changes nothing, so that
``layout``, ``settings`` and ``time_shares`` import anywhere (the command
line and the CDK app read the settings' vocabulary) and ``load_processor``
can tell a missing extra from a broken module. ``load_processor`` sets
``OMP_NUM_THREADS=1`` before it imports the processor.
"""
