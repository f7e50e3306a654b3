# Storage options: by protocol, or by URI prefix where one bucket needs its own (docs: storage.md).
storage_options = (
    # --8<-- [start:storage_options]
    {
        "s3": {"profile": "lake"},
        "s3://lake-eu": {
            "s3_additional_kwargs": {"ServerSideEncryption": "aws:kms", "SSEKMSKeyId": "key-eu"}
        },
    }
    # --8<-- [end:storage_options]
)
