"""The app on one machine: moto's S3, Lambda, IAM and Step Functions in one server process,
with the stack the CDK app synthesizes deployed into it and Lambda invocations run by
:mod:`s3wq.dev.localcloud.runner` as real handler processes.

Not part of the Lambda asset (infra/asset_files.py leaves dev/ out): it needs moto, which the
developer install (`make install`) and the ``s3wq[local]`` extra bring.
"""
