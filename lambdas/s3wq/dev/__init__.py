"""Developer tools, not shipped to Lambda (the ``s3wq[local]`` extra): a local S3 endpoint, samples, the local cloud."""
