"""The JVM side of S3 for tests and benchmarks: ``hadoop-aws`` and the AWS SDK it was built
against, for ``s3a:`` (test tooling: it runs ``mvn``, so no shipped package carries it).

The pyspark wheel ships Hadoop's client but not ``hadoop-aws``, so its JVM cannot read
``s3a://`` and ``fed_spark.read`` scans S3 tables through Python workers. ``s3a_jars()``
fetches the two jars that match the wheel's Hadoop from Maven Central with ``mvn`` (into
the local Maven repository, ``~/.m2``: once per machine, about 700 MB) and returns their
paths for ``spark.jars``; ``s3a_conf`` gives the settings that point S3A at an endpoint.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

from fedcore.exceptions import FedError

MAVEN_REPOSITORY = Path.home() / ".m2" / "repository"
SIMPLE_CREDENTIALS = "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider"


def hadoop_version() -> str:
    """The Hadoop version of the installed pyspark (from its client jar's name)."""
    import pyspark

    jars = Path(pyspark.__file__).parent / "jars"
    for jar in jars.glob("hadoop-client-api-*.jar"):
        found = re.fullmatch(r"hadoop-client-api-(.+)\.jar", jar.name)
        if found:
            return found[1]
    raise FedError(f"no hadoop-client-api jar in {jars}: cannot tell pyspark's Hadoop version")


#: hadoop-aws's compile-time dependencies, with the property of Hadoop's build that gives
#: each one's version.
_S3A_DEPENDENCIES = (
    ("software.amazon.awssdk", "bundle", "aws-java-sdk-v2.version"),
    (
        "software.amazon.s3.analyticsaccelerator",
        "analyticsaccelerator-s3",
        "amazon-s3-analyticsaccelerator-s3.version",
    ),
)


def s3a_jars() -> list[str]:
    """``hadoop-aws`` for pyspark's Hadoop and the jars it needs at the versions Hadoop's
    build names (the AWS SDK bundle, S3's analytics accelerator), fetched with ``mvn`` when
    not in the local Maven repository yet."""
    hadoop = hadoop_version()
    properties = _fetch("org.apache.hadoop", "hadoop-project", hadoop, "pom").read_text()
    jars = [str(_fetch("org.apache.hadoop", "hadoop-aws", hadoop, "jar"))]
    for group, artifact, version_property in _S3A_DEPENDENCIES:
        found = re.search(rf"<{re.escape(version_property)}>([^<]+)<", properties)
        if found is None:
            raise FedError(f"Hadoop {hadoop}'s build names no {version_property}")
        jars.append(str(_fetch(group, artifact, found[1], "jar")))
    return jars


def s3a_conf(endpoint_url: str, key: str, secret: str, region: str = "us-east-1") -> dict[str, str]:
    """Spark settings for S3A against ``endpoint_url`` (path-style, as loopback servers need)."""
    return {
        "spark.hadoop.fs.s3a.endpoint": endpoint_url,
        "spark.hadoop.fs.s3a.endpoint.region": region,
        "spark.hadoop.fs.s3a.path.style.access": "true",
        "spark.hadoop.fs.s3a.connection.ssl.enabled": str(endpoint_url.startswith("https")).lower(),
        "spark.hadoop.fs.s3a.access.key": key,
        "spark.hadoop.fs.s3a.secret.key": secret,
        "spark.hadoop.fs.s3a.aws.credentials.provider": SIMPLE_CREDENTIALS,
    }


def _fetch(group: str, artifact: str, version: str, packaging: str) -> Path:
    path = MAVEN_REPOSITORY.joinpath(
        *group.split("."), artifact, version, f"{artifact}-{version}.{packaging}"
    )
    if path.exists():
        return path
    mvn = shutil.which("mvn")
    if mvn is None:
        raise FedError(f"{artifact}-{version}.{packaging} is not in {MAVEN_REPOSITORY} and there is no mvn")
    coordinates = f"-Dartifact={group}:{artifact}:{version}:{packaging}"
    done = subprocess.run(
        [mvn, "-q", "dependency:get", coordinates, "-Dtransitive=false"],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0 or not path.exists():
        raise FedError(f"mvn could not fetch {group}:{artifact}:{version}: {done.stdout[-500:]}")
    return path
