package fed.hive4;

import org.apache.hadoop.hive.serde2.AbstractSerDe;

/**
 * Iceberg's Hive storage handler, naming the SerDe Hive 4 can initialize. The build renames
 * this class to the runtime's handler name and the runtime's own class to its superclass here
 * (see pom.xml).
 */
public class IcebergStorageHandler extends org.apache.iceberg.mr.hive.HiveIcebergStorageHandler {
  @Override
  public Class<? extends AbstractSerDe> getSerDeClass() {
    return IcebergSerDe.class;
  }
}
