"""fed's development tooling: loopback S3 servers, the throttling lab, the writer stress
driver, the demo and test helpers. Not part of fedcore's wheel; written against fedcore."""
