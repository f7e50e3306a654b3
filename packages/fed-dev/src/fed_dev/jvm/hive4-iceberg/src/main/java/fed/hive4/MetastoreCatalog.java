package fed.hive4;

import java.util.List;
import java.util.Map;
import org.apache.hadoop.conf.Configurable;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.hive.metastore.HiveMetaStoreClient;
import org.apache.iceberg.BaseTable;
import org.apache.iceberg.StaticTableOperations;
import org.apache.iceberg.Table;
import org.apache.iceberg.catalog.Catalog;
import org.apache.iceberg.catalog.Namespace;
import org.apache.iceberg.catalog.TableIdentifier;
import org.apache.iceberg.exceptions.NoSuchTableException;
import org.apache.iceberg.hadoop.HadoopFileIO;

/**
 * A read-only Iceberg catalog over a Hive metastore: a table is the metadata file its
 * metastore entry's {@code metadata_location} names, read when the table is loaded (so a query
 * sees the version the metastore held when it was planned). Stands in for Iceberg's
 * HiveCatalog, whose 1.4 build does not run in Hive 4; it never writes.
 */
public class MetastoreCatalog implements Catalog, Configurable {
  private String name = "metastore";
  private Configuration conf;

  @Override
  public void initialize(String catalogName, Map<String, String> properties) {
    this.name = catalogName;
  }

  @Override
  public String name() {
    return name;
  }

  @Override
  public void setConf(Configuration conf) {
    this.conf = conf;
  }

  @Override
  public Configuration getConf() {
    return conf;
  }

  @Override
  public Table loadTable(TableIdentifier identifier) {
    if (identifier.namespace().levels().length != 1) {
      throw new NoSuchTableException("not a metastore table name: %s", identifier);
    }
    String database = identifier.namespace().level(0);
    String location;
    HiveMetaStoreClient client = null;
    try {
      client = new HiveMetaStoreClient(conf);
      Map<String, String> params = client.getTable(database, identifier.name()).getParameters();
      location = params == null ? null : params.get("metadata_location");
    } catch (org.apache.hadoop.hive.metastore.api.NoSuchObjectException e) {
      throw new NoSuchTableException(e, "no table %s in the metastore", identifier);
    } catch (org.apache.thrift.TException e) {
      throw new RuntimeException("the metastore failed to look up " + identifier + ": " + e, e);
    } finally {
      if (client != null) {
        client.close();
      }
    }
    if (location == null || location.isEmpty()) {
      throw new NoSuchTableException("%s is not an Iceberg table: no metadata_location", identifier);
    }
    HadoopFileIO io = new HadoopFileIO(conf);
    return new BaseTable(new StaticTableOperations(location, io), name + "." + identifier);
  }

  @Override
  public List<TableIdentifier> listTables(Namespace namespace) {
    throw new UnsupportedOperationException("this catalog only loads tables by name");
  }

  @Override
  public boolean dropTable(TableIdentifier identifier, boolean purge) {
    throw new UnsupportedOperationException("read-only: the table's writer owns it");
  }

  @Override
  public void renameTable(TableIdentifier from, TableIdentifier to) {
    throw new UnsupportedOperationException("read-only: the table's writer owns it");
  }
}
