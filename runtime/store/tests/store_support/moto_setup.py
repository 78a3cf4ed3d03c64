#!/usr/bin/env python3
"""Prepares a freshly started moto S3 server for Switchyard's store tests.

Creates an IAM user with an access key that may do anything, the buckets
named on the command line, then turns moto's request authentication on
(POST /moto-api/reset-auth), so that from then on only correctly signed
requests with that key succeed. Prints {"key_id": ..., "secret": ...}.

    python moto_setup.py http://127.0.0.1:PORT bucket [bucket...]
"""

import json
import sys
import urllib.request

import boto3


def main() -> int:
    endpoint, buckets = sys.argv[1], sys.argv[2:]
    anon = dict(endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id="setup", aws_secret_access_key="setup")
    iam = boto3.client("iam", **anon)
    iam.create_user(UserName="switchyard")
    policy = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}
    iam.put_user_policy(UserName="switchyard", PolicyName="all", PolicyDocument=json.dumps(policy))
    key = iam.create_access_key(UserName="switchyard")["AccessKey"]
    s3 = boto3.client("s3", **anon)
    for bucket in buckets:
        s3.create_bucket(Bucket=bucket)
    request = urllib.request.Request(
        f"{endpoint}/moto-api/reset-auth", data=b"0", method="POST", headers={"Content-Type": "text/plain"}
    )
    urllib.request.urlopen(request, timeout=10).read()
    print(json.dumps({"key_id": key["AccessKeyId"], "secret": key["SecretAccessKey"]}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
