-- Least privilege in Snowflake for cdc: one role creates the objects (snowflake-bootstrap), another only loads
-- and merges into them (snowflake-apply, i.e. `cdc run`). Run as SECURITYADMIN (roles, grants) and SYSADMIN
-- (database, warehouse); names as in examples/cdc.s3.toml ([snowflake] database RAW, schema HR). Users
-- authenticate with a key pair (connections.toml: private_key_file), never a password on a command line.

-- The warehouse both use: running queries, nothing else.
CREATE WAREHOUSE IF NOT EXISTS CDC_WH WITH WAREHOUSE_SIZE = 'XSMALL' AUTO_SUSPEND = 60 AUTO_RESUME = TRUE;
CREATE DATABASE IF NOT EXISTS RAW;

-- snowflake-bootstrap: owns what it creates in RAW (the schema HR, tables, file format, stage, pipe, stream,
-- task, dynamic tables) and adds columns to its tables later (ALTER TABLE needs ownership). Used by a person
-- or a deploy job, not by the host that replicates.
CREATE ROLE IF NOT EXISTS CDC_BOOTSTRAP;
GRANT USAGE ON WAREHOUSE CDC_WH TO ROLE CDC_BOOTSTRAP;
GRANT USAGE, CREATE SCHEMA ON DATABASE RAW TO ROLE CDC_BOOTSTRAP;
-- Only with --history as a task (the task runs the MERGE on a schedule), and with --s3 (the pipe's storage
-- integration is created by ACCOUNTADMIN once, then granted: GRANT USAGE ON INTEGRATION ... TO ROLE CDC_BOOTSTRAP).
GRANT EXECUTE TASK ON ACCOUNT TO ROLE CDC_BOOTSTRAP;

-- snowflake-apply: reads and changes rows, never the objects. Per batch it PUTs Parquet files to the stage
-- _CDC_BATCHES, COPYs them into a transient staging table of its own (_CDC_STG_..., dropped after), MERGEs into
-- the target (and history) tables and records the batch in _CDC_APPLIED_BATCHES, in one transaction.
CREATE ROLE IF NOT EXISTS CDC_APPLY;
GRANT USAGE ON WAREHOUSE CDC_WH TO ROLE CDC_APPLY;
GRANT USAGE ON DATABASE RAW TO ROLE CDC_APPLY;
-- After snowflake-bootstrap has created the schema HR:
GRANT USAGE ON SCHEMA RAW.HR TO ROLE CDC_APPLY;
-- its staging tables: CREATE TABLE lets it create (and so own, and drop) those; it owns nothing else.
GRANT CREATE TABLE ON SCHEMA RAW.HR TO ROLE CDC_APPLY;
GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA RAW.HR TO ROLE CDC_APPLY;
GRANT SELECT, INSERT, UPDATE, DELETE ON FUTURE TABLES IN SCHEMA RAW.HR TO ROLE CDC_APPLY;
-- PUT and REMOVE on the internal stage (READ is needed with WRITE).
GRANT READ, WRITE ON STAGE RAW.HR."_CDC_BATCHES" TO ROLE CDC_APPLY;

-- The users: the replicating host gets CDC_APPLY only.
-- CREATE USER CDC_APPLY_SVC DEFAULT_ROLE = CDC_APPLY RSA_PUBLIC_KEY = '<public key>' TYPE = SERVICE;
GRANT ROLE CDC_APPLY TO USER CDC_APPLY_SVC;
-- CREATE USER CDC_DEPLOY DEFAULT_ROLE = CDC_BOOTSTRAP RSA_PUBLIC_KEY = '<public key>' TYPE = SERVICE;
GRANT ROLE CDC_BOOTSTRAP TO USER CDC_DEPLOY;
