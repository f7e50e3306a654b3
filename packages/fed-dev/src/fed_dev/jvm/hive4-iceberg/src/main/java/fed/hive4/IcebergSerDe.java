package fed.hive4;

import java.util.Properties;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.hive.serde2.SerDeException;
import org.apache.hadoop.hive.serde2.SerDeUtils;

/**
 * Iceberg's Hive SerDe as Hive 4 initializes it. The build renames this class to the runtime's
 * SerDe name and the runtime's own class to its superclass here (see pom.xml).
 */
public class IcebergSerDe extends org.apache.iceberg.mr.hive.HiveIcebergSerDe {
  @Override
  public void initialize(Configuration conf, Properties table, Properties partition)
      throws SerDeException {
    super.initialize(conf, table, partition); // Hive 4's AbstractSerDe keeps conf and properties
    // The runtime's form: the schema, the projection and the object inspector come from here.
    initialize(conf, SerDeUtils.createOverlayedProperties(table, partition));
  }
}
