"""``s3wq work --processor ocr`` from the OCR venv drains a queue on S3 over HTTP; ``status`` counts done groups and input errors."""

from __future__ import annotations

import json
import subprocess

from support import run_cli

from .conftest import ocr_env

INPUTS = ["page.png", "text.pdf", "corrupt.pdf", "encrypted.pdf"]


def test_work_with_the_ocr_processor_drains_the_queue_and_counts_input_errors(ocr_python, scans, s3_client, bucket, s3_workspace):
    folder, known = scans
    for name in INPUTS:
        s3_client.put_object(Bucket=bucket, Key=f"inputs/{name}", Body=(folder / name).read_bytes())
    assert run_cli("populate", s3_workspace, f"s3://{bucket}/inputs/*", "--group-size", "1").returncode == 0

    work = subprocess.run(
        [str(ocr_python), "-m", "s3wq", "work", s3_workspace, "--processor", "ocr", "--json"],
        capture_output=True,
        text=True,
        timeout=300,
        env=ocr_env(),
    )

    assert work.returncode == 0, work.stderr[-3000:]
    assert json.loads(work.stdout)["processed"] == len(INPUTS), work.stdout + work.stderr[-3000:]
    status = json.loads(run_cli("status", s3_workspace, "--json").stdout)
    assert (status["done"], status["failed"], status["pending"], status["input_error_groups"]) == (4, 0, 0, 2), (
        status,
        work.stderr[-3000:],
    )
    failures = run_cli("failures", s3_workspace, "--inputs", "--json")
    assert failures.returncode == 0, failures.stderr
    listed = {error["path"].rsplit("/", 1)[-1] for group in json.loads(failures.stdout)["groups"] for error in group["inputs"]}
    assert listed == {"encrypted.pdf", "corrupt.pdf"}, failures.stdout
    results = [
        json.loads(line)
        for item in s3_client.list_objects_v2(Bucket=bucket, Prefix="ws/results/")["Contents"]
        for line in s3_client.get_object(Bucket=bucket, Key=item["Key"])["Body"].read().decode().splitlines()
    ]
    by_name = {r["source"].rsplit("/", 1)[-1]: r for r in results}
    assert " ".join(by_name["page.png"]["text"].split()) == " ".join(line for page in known["page.png"] for line in page)
    assert by_name["text.pdf"]["metadata"]["pages"][0]["method"] == "text_layer"
