#!/bin/sh
# The apache/hive image's interface: SERVICE_NAME (metastore or hiveserver2) chooses the service,
# HIVE_CUSTOM_CONF_DIR holds its metastore-site.xml or hive-site.xml.
set -e
conf="${HIVE_CUSTOM_CONF_DIR:-/opt/hive/conf}"
# Java 17 must open these JDK packages to HiveServer2 (fed_dev.stack.HIVE_JAVA_OPTIONS).
opens=$(cat /opt/hive/classpath/java-options)
case "$SERVICE_NAME" in
  metastore)
    exec java -Xmx1g $SERVICE_OPTS -cp "$conf:$(cat /opt/hive/classpath/metastore)" \
      org.apache.hadoop.hive.metastore.HiveMetaStore ;;
  hiveserver2)
    # Iceberg tables open through their metastore entry's metadata_location: this image's
    # HiveServer2 carries Iceberg's Hive runtime adapted to Hive 4 (the stock image bundles Hive's own).
    exec java -Xmx2g $opens -Dhive.log.dir=/tmp/hive -Dhive.log.file=hive.log $SERVICE_OPTS \
      -cp "$conf:$(cat /opt/hive/classpath/hiveserver2)" org.apache.hive.service.server.HiveServer2 \
      --hiveconf iceberg.catalog.default_iceberg.catalog-impl=fed.hive4.MetastoreCatalog ;;
  *)
    echo "SERVICE_NAME must be metastore or hiveserver2, not '${SERVICE_NAME}'" >&2
    exit 2 ;;
esac
