-- Least privilege for cdc. Run as an administrator; set the password out of band
-- (never in a script that lands in shell history or version control).
CREATE USER 'cdc_repl'@'10.0.%' IDENTIFIED BY '<from your secrets manager>' REQUIRE SSL;
-- read the binlog (REPLICATION SLAVE) and its status (REPLICATION CLIENT; MariaDB 10.5+: BINLOG MONITOR)
GRANT REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO 'cdc_repl'@'10.0.%';
-- snapshot and schema reads: only the replicated schemas
GRANT SELECT ON hr.* TO 'cdc_repl'@'10.0.%';
-- snapshot's short read lock where FLUSH TABLES WITH READ LOCK is not allowed (RDS):
GRANT LOCK TABLES ON hr.* TO 'cdc_repl'@'10.0.%';
-- MariaDB 10.5+ names the status privilege BINLOG MONITOR:
-- GRANT REPLICATION SLAVE, BINLOG MONITOR ON *.* TO 'cdc_repl'@'10.0.%';
-- only for `cdc resnapshot` (docs/guide.md): the watermark table, on the primary, and writing it
-- CREATE DATABASE IF NOT EXISTS cdc;
-- CREATE TABLE cdc.watermarks (slot VARCHAR(64) NOT NULL PRIMARY KEY, mark TEXT NOT NULL) ENGINE=InnoDB;
-- GRANT INSERT, UPDATE ON cdc.watermarks TO 'cdc_repl'@'10.0.%';
