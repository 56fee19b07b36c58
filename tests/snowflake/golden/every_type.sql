-- add_column.sql.j2
ALTER TABLE "EVERY_TYPE" ADD COLUMN "NEW COL" NUMBER(10,0);

-- batch_source.sql.j2
SELECT
"ID" AS "ID",
"T_I8" AS "T_I8",
"T_U8" AS "T_U8",
"T_I16" AS "T_I16",
"T_U24" AS "T_U24",
"T_I32" AS "T_I32",
"T_U32" AS "T_U32",
"T_I64" AS "T_I64",
"PRICE" AS "PRICE",
"HUGE" AS "HUGE",
"F" AS "F",
"D" AS "D",
"FLAGS" AS "FLAGS",
"B1" AS "B1",
"BORN" AS "BORN",
"AT" AS "AT",
"AT0" AS "AT0",
"SEEN" AS "SEEN",
"DUR" AS "DUR",
"YR" AS "YR",
"CODE" AS "CODE",
"Name Of" AS "Name Of",
"quo""te" AS "quo""te",
"BIN" AS "BIN",
"BLOB" AS "BLOB",
PARSE_JSON("DOC") AS "DOC",
"STATE" AS "STATE",
"TAGS" AS "TAGS",
"GEO" AS "GEO",
    "_CDC_POSITION", "_CDC_COMMIT_TS", "_CDC_OP", "METADATA$ACTION" AS "_CDC_ACTION"
FROM "_CDC_STG_RUN_1";

-- bookkeeping_table.sql.j2
CREATE TABLE IF NOT EXISTS "_CDC_APPLIED_BATCHES" (
    "BATCH_ID" VARCHAR NOT NULL,
    "APPLIED_AT" TIMESTAMP_TZ(6) NOT NULL,
    "RUN_ID" VARCHAR NOT NULL,
    "ROWS" NUMBER(19,0) NOT NULL,
    PRIMARY KEY ("BATCH_ID")
);

-- changes.sql.j2
SELECT
    "IMG":"id"::NUMBER(20,0) AS "ID",
    "IMG":"t_i8"::NUMBER(3,0) AS "T_I8",
    "IMG":"t_u8"::NUMBER(3,0) AS "T_U8",
    "IMG":"t_i16"::NUMBER(5,0) AS "T_I16",
    "IMG":"t_u24"::NUMBER(8,0) AS "T_U24",
    "IMG":"t_i32"::NUMBER(10,0) AS "T_I32",
    "IMG":"t_u32"::NUMBER(10,0) AS "T_U32",
    "IMG":"t_i64"::NUMBER(19,0) AS "T_I64",
    "IMG":"price"::NUMBER(18,4) AS "PRICE",
    "IMG":"huge"::VARCHAR AS "HUGE",
    "IMG":"f"::FLOAT AS "F",
    "IMG":"d"::FLOAT AS "D",
    "IMG":"flags"::NUMBER(20,0) AS "FLAGS",
    "IMG":"b1"::NUMBER(1,0) AS "B1",
    COALESCE(TRY_TO_DATE("IMG":"born"::VARCHAR), '0001-01-01'::DATE) AS "BORN",
    TRY_TO_TIMESTAMP_NTZ("IMG":"at"::VARCHAR)::TIMESTAMP_NTZ(6) AS "AT",
    TRY_TO_TIMESTAMP_NTZ("IMG":"at0"::VARCHAR)::TIMESTAMP_NTZ(0) AS "AT0",
    TRY_TO_TIMESTAMP_TZ("IMG":"seen"::VARCHAR)::TIMESTAMP_TZ(3) AS "SEEN",
    "IMG":"dur"::VARCHAR AS "DUR",
    "IMG":"yr"::NUMBER(4,0) AS "YR",
    "IMG":"code"::VARCHAR AS "CODE",
    "IMG":"Name Of"::VARCHAR AS "Name Of",
    "IMG":"quo""te"::VARCHAR AS "quo""te",
    BASE64_DECODE_BINARY("IMG":"bin"::VARCHAR) AS "BIN",
    BASE64_DECODE_BINARY("IMG":"blob"::VARCHAR) AS "BLOB",
    PARSE_JSON("IMG":"doc"::VARCHAR) AS "DOC",
    "IMG":"state"::VARCHAR AS "STATE",
    "IMG":"tags"::ARRAY AS "TAGS",
    BASE64_DECODE_BINARY("IMG":"geo"::VARCHAR) AS "GEO",
    "P" AS "_CDC_POSITION",
    TRY_TO_TIMESTAMP_TZ("R":"ts"::VARCHAR) AS "_CDC_COMMIT_TS",
    "R":"op"::VARCHAR AS "_CDC_OP",
    "ACTION" AS "_CDC_ACTION"
FROM (
    SELECT "R", "P", "R":"after" AS "IMG", 'INSERT' AS "ACTION" FROM (
        SELECT "RECORD" AS "R", "RECORD":"position"::VARCHAR AS "P" FROM "L"
        WHERE "RECORD":"op"::VARCHAR IN ('c', 'u', 'r', 'd')
        QUALIFY ROW_NUMBER() OVER (PARTITION BY "P" ORDER BY "FILE_NAME", "FILE_ROW") = 1
    ) WHERE "R":"op"::VARCHAR <> 'd'
    UNION ALL
    SELECT "R", "P", "R":"before" AS "IMG", 'DELETE' AS "ACTION" FROM (
        SELECT "RECORD" AS "R", "RECORD":"position"::VARCHAR AS "P" FROM "L"
        WHERE "RECORD":"op"::VARCHAR IN ('u', 'd')
        QUALIFY ROW_NUMBER() OVER (PARTITION BY "P" ORDER BY "FILE_NAME", "FILE_ROW") = 1
    ) WHERE "R":"op"::VARCHAR = 'd' OR NOT ("R":"before":"id"::NUMBER(20,0) = "R":"after":"id"::NUMBER(20,0))
)
QUALIFY ROW_NUMBER() OVER (PARTITION BY "IMG":"id"::NUMBER(20,0) ORDER BY "P" DESC) = 1;

-- convert_column.sql.j2
UPDATE "EVERY_TYPE" SET "A_CDC_CONVERTED" = "A"::NUMBER(8,1);

-- drop_column.sql.j2
ALTER TABLE "EVERY_TYPE" DROP COLUMN "OLD COL";

-- dynamic_history.sql.j2
CREATE DYNAMIC TABLE IF NOT EXISTS "EVERY_TYPE_HISTORY"
    TARGET_LAG = '1 minute'
    WAREHOUSE = "ETL"
    AS
SELECT * EXCLUDE ("_CDC_ACTION") FROM (
    SELECT
        "ID",
        "T_I8",
        "T_U8",
        "T_I16",
        "T_U24",
        "T_I32",
        "T_U32",
        "T_I64",
        "PRICE",
        "HUGE",
        "F",
        "D",
        "FLAGS",
        "B1",
        "BORN",
        "AT",
        "AT0",
        "SEEN",
        "DUR",
        "YR",
        "CODE",
        "Name Of",
        "quo""te",
        "BIN",
        "BLOB",
        "DOC",
        "STATE",
        "TAGS",
        "GEO",
        "_CDC_POSITION", "_CDC_COMMIT_TS", "_CDC_OP", "_CDC_ACTION",
        "_CDC_COMMIT_TS" AS "_CDC_VALID_FROM",
        LEAD("_CDC_COMMIT_TS") OVER (PARTITION BY "ID" ORDER BY "_CDC_POSITION") AS "_CDC_VALID_TO",
        LEAD("_CDC_COMMIT_TS") OVER (PARTITION BY "ID" ORDER BY "_CDC_POSITION") IS NULL AS "_CDC_IS_CURRENT"
    FROM (SELECT
    "IMG":"id"::NUMBER(20,0) AS "ID",
    "IMG":"t_i8"::NUMBER(3,0) AS "T_I8",
    "IMG":"t_u8"::NUMBER(3,0) AS "T_U8",
    "IMG":"t_i16"::NUMBER(5,0) AS "T_I16",
    "IMG":"t_u24"::NUMBER(8,0) AS "T_U24",
    "IMG":"t_i32"::NUMBER(10,0) AS "T_I32",
    "IMG":"t_u32"::NUMBER(10,0) AS "T_U32",
    "IMG":"t_i64"::NUMBER(19,0) AS "T_I64",
    "IMG":"price"::NUMBER(18,4) AS "PRICE",
    "IMG":"huge"::VARCHAR AS "HUGE",
    "IMG":"f"::FLOAT AS "F",
    "IMG":"d"::FLOAT AS "D",
    "IMG":"flags"::NUMBER(20,0) AS "FLAGS",
    "IMG":"b1"::NUMBER(1,0) AS "B1",
    COALESCE(TRY_TO_DATE("IMG":"born"::VARCHAR), '0001-01-01'::DATE) AS "BORN",
    TRY_TO_TIMESTAMP_NTZ("IMG":"at"::VARCHAR)::TIMESTAMP_NTZ(6) AS "AT",
    TRY_TO_TIMESTAMP_NTZ("IMG":"at0"::VARCHAR)::TIMESTAMP_NTZ(0) AS "AT0",
    TRY_TO_TIMESTAMP_TZ("IMG":"seen"::VARCHAR)::TIMESTAMP_TZ(3) AS "SEEN",
    "IMG":"dur"::VARCHAR AS "DUR",
    "IMG":"yr"::NUMBER(4,0) AS "YR",
    "IMG":"code"::VARCHAR AS "CODE",
    "IMG":"Name Of"::VARCHAR AS "Name Of",
    "IMG":"quo""te"::VARCHAR AS "quo""te",
    BASE64_DECODE_BINARY("IMG":"bin"::VARCHAR) AS "BIN",
    BASE64_DECODE_BINARY("IMG":"blob"::VARCHAR) AS "BLOB",
    PARSE_JSON("IMG":"doc"::VARCHAR) AS "DOC",
    "IMG":"state"::VARCHAR AS "STATE",
    "IMG":"tags"::ARRAY AS "TAGS",
    BASE64_DECODE_BINARY("IMG":"geo"::VARCHAR) AS "GEO",
    "P" AS "_CDC_POSITION",
    TRY_TO_TIMESTAMP_TZ("R":"ts"::VARCHAR) AS "_CDC_COMMIT_TS",
    "R":"op"::VARCHAR AS "_CDC_OP",
    "ACTION" AS "_CDC_ACTION"
FROM (
    SELECT "R", "P", "R":"after" AS "IMG", 'INSERT' AS "ACTION" FROM (
        SELECT "RECORD" AS "R", "RECORD":"position"::VARCHAR AS "P" FROM "EVERY_TYPE_LANDING"
        WHERE "RECORD":"op"::VARCHAR IN ('c', 'u', 'r', 'd')
        QUALIFY ROW_NUMBER() OVER (PARTITION BY "P" ORDER BY "FILE_NAME", "FILE_ROW") = 1
    ) WHERE "R":"op"::VARCHAR <> 'd'
    UNION ALL
    SELECT "R", "P", "R":"before" AS "IMG", 'DELETE' AS "ACTION" FROM (
        SELECT "RECORD" AS "R", "RECORD":"position"::VARCHAR AS "P" FROM "EVERY_TYPE_LANDING"
        WHERE "RECORD":"op"::VARCHAR IN ('u', 'd')
        QUALIFY ROW_NUMBER() OVER (PARTITION BY "P" ORDER BY "FILE_NAME", "FILE_ROW") = 1
    ) WHERE "R":"op"::VARCHAR = 'd' OR NOT ("R":"before":"id"::NUMBER(20,0) = "R":"after":"id"::NUMBER(20,0))
))
)
WHERE "_CDC_ACTION" = 'INSERT';

-- dynamic_table.sql.j2
CREATE DYNAMIC TABLE IF NOT EXISTS "EVERY_TYPE"
    TARGET_LAG = '1 minute'
    WAREHOUSE = "ETL"
    AS
SELECT
    "ID",
    "T_I8",
    "T_U8",
    "T_I16",
    "T_U24",
    "T_I32",
    "T_U32",
    "T_I64",
    "PRICE",
    "HUGE",
    "F",
    "D",
    "FLAGS",
    "B1",
    "BORN",
    "AT",
    "AT0",
    "SEEN",
    "DUR",
    "YR",
    "CODE",
    "Name Of",
    "quo""te",
    "BIN",
    "BLOB",
    "DOC",
    "STATE",
    "TAGS",
    "GEO",
    "_CDC_ACTION" = 'DELETE' AS "_CDC_DELETED",
    IFF("_CDC_ACTION" = 'DELETE', "_CDC_COMMIT_TS", NULL) AS "_CDC_DELETED_AT",
    "_CDC_POSITION", "_CDC_COMMIT_TS", "_CDC_OP"
FROM (SELECT
    "IMG":"id"::NUMBER(20,0) AS "ID",
    "IMG":"t_i8"::NUMBER(3,0) AS "T_I8",
    "IMG":"t_u8"::NUMBER(3,0) AS "T_U8",
    "IMG":"t_i16"::NUMBER(5,0) AS "T_I16",
    "IMG":"t_u24"::NUMBER(8,0) AS "T_U24",
    "IMG":"t_i32"::NUMBER(10,0) AS "T_I32",
    "IMG":"t_u32"::NUMBER(10,0) AS "T_U32",
    "IMG":"t_i64"::NUMBER(19,0) AS "T_I64",
    "IMG":"price"::NUMBER(18,4) AS "PRICE",
    "IMG":"huge"::VARCHAR AS "HUGE",
    "IMG":"f"::FLOAT AS "F",
    "IMG":"d"::FLOAT AS "D",
    "IMG":"flags"::NUMBER(20,0) AS "FLAGS",
    "IMG":"b1"::NUMBER(1,0) AS "B1",
    COALESCE(TRY_TO_DATE("IMG":"born"::VARCHAR), '0001-01-01'::DATE) AS "BORN",
    TRY_TO_TIMESTAMP_NTZ("IMG":"at"::VARCHAR)::TIMESTAMP_NTZ(6) AS "AT",
    TRY_TO_TIMESTAMP_NTZ("IMG":"at0"::VARCHAR)::TIMESTAMP_NTZ(0) AS "AT0",
    TRY_TO_TIMESTAMP_TZ("IMG":"seen"::VARCHAR)::TIMESTAMP_TZ(3) AS "SEEN",
    "IMG":"dur"::VARCHAR AS "DUR",
    "IMG":"yr"::NUMBER(4,0) AS "YR",
    "IMG":"code"::VARCHAR AS "CODE",
    "IMG":"Name Of"::VARCHAR AS "Name Of",
    "IMG":"quo""te"::VARCHAR AS "quo""te",
    BASE64_DECODE_BINARY("IMG":"bin"::VARCHAR) AS "BIN",
    BASE64_DECODE_BINARY("IMG":"blob"::VARCHAR) AS "BLOB",
    PARSE_JSON("IMG":"doc"::VARCHAR) AS "DOC",
    "IMG":"state"::VARCHAR AS "STATE",
    "IMG":"tags"::ARRAY AS "TAGS",
    BASE64_DECODE_BINARY("IMG":"geo"::VARCHAR) AS "GEO",
    "P" AS "_CDC_POSITION",
    TRY_TO_TIMESTAMP_TZ("R":"ts"::VARCHAR) AS "_CDC_COMMIT_TS",
    "R":"op"::VARCHAR AS "_CDC_OP",
    "ACTION" AS "_CDC_ACTION"
FROM (
    SELECT "R", "P", "R":"after" AS "IMG", 'INSERT' AS "ACTION" FROM (
        SELECT "RECORD" AS "R", "RECORD":"position"::VARCHAR AS "P" FROM "EVERY_TYPE_LANDING"
        WHERE "RECORD":"op"::VARCHAR IN ('c', 'u', 'r', 'd')
        QUALIFY ROW_NUMBER() OVER (PARTITION BY "P" ORDER BY "FILE_NAME", "FILE_ROW") = 1
    ) WHERE "R":"op"::VARCHAR <> 'd'
    UNION ALL
    SELECT "R", "P", "R":"before" AS "IMG", 'DELETE' AS "ACTION" FROM (
        SELECT "RECORD" AS "R", "RECORD":"position"::VARCHAR AS "P" FROM "EVERY_TYPE_LANDING"
        WHERE "RECORD":"op"::VARCHAR IN ('u', 'd')
        QUALIFY ROW_NUMBER() OVER (PARTITION BY "P" ORDER BY "FILE_NAME", "FILE_ROW") = 1
    ) WHERE "R":"op"::VARCHAR = 'd' OR NOT ("R":"before":"id"::NUMBER(20,0) = "R":"after":"id"::NUMBER(20,0))
)
QUALIFY ROW_NUMBER() OVER (PARTITION BY "IMG":"id"::NUMBER(20,0) ORDER BY "P" DESC) = 1);

-- external_stage.sql.j2
CREATE STAGE IF NOT EXISTS "_CDC_CHANGES"
    URL = 's3://bucket/cdc/'
    STORAGE_INTEGRATION = "CDC_S3"
    FILE_FORMAT = (FORMAT_NAME = "_CDC_JSON_GZIP");

-- file_format.sql.j2
CREATE FILE FORMAT IF NOT EXISTS "_CDC_JSON_GZIP"
    TYPE = JSON
    COMPRESSION = GZIP
    STRIP_OUTER_ARRAY = FALSE;

-- fill_column.sql.j2
UPDATE "EVERY_TYPE_HISTORY" SET "C_DATE" = COALESCE(TRY_TO_DATE(PARSE_JSON(?):"born"::VARCHAR), '0001-01-01'::DATE) WHERE "_CDC_POSITION" < ? AND "_CDC_IS_CURRENT";

-- history_close.sql.j2
UPDATE "EVERY_TYPE_HISTORY" AS "H"
SET "_CDC_VALID_TO" = "S"."_CDC_COMMIT_TS", "_CDC_IS_CURRENT" = FALSE
FROM (SELECT
"ID" AS "ID",
"T_I8" AS "T_I8",
"T_U8" AS "T_U8",
"T_I16" AS "T_I16",
"T_U24" AS "T_U24",
"T_I32" AS "T_I32",
"T_U32" AS "T_U32",
"T_I64" AS "T_I64",
"PRICE" AS "PRICE",
"HUGE" AS "HUGE",
"F" AS "F",
"D" AS "D",
"FLAGS" AS "FLAGS",
"B1" AS "B1",
"BORN" AS "BORN",
"AT" AS "AT",
"AT0" AS "AT0",
"SEEN" AS "SEEN",
"DUR" AS "DUR",
"YR" AS "YR",
"CODE" AS "CODE",
"Name Of" AS "Name Of",
"quo""te" AS "quo""te",
"BIN" AS "BIN",
"BLOB" AS "BLOB",
PARSE_JSON("DOC") AS "DOC",
"STATE" AS "STATE",
"TAGS" AS "TAGS",
"GEO" AS "GEO",
    "_CDC_POSITION", "_CDC_COMMIT_TS", "_CDC_OP", "METADATA$ACTION" AS "_CDC_ACTION"
FROM "_CDC_STG_RUN_1") AS "S"
WHERE "H"."ID" = "S"."ID"
    AND "H"."_CDC_IS_CURRENT"
    AND "H"."_CDC_POSITION" < "S"."_CDC_POSITION";

-- history_insert.sql.j2
INSERT INTO "EVERY_TYPE_HISTORY" (
    "ID",
    "T_I8",
    "T_U8",
    "T_I16",
    "T_U24",
    "T_I32",
    "T_U32",
    "T_I64",
    "PRICE",
    "HUGE",
    "F",
    "D",
    "FLAGS",
    "B1",
    "BORN",
    "AT",
    "AT0",
    "SEEN",
    "DUR",
    "YR",
    "CODE",
    "Name Of",
    "quo""te",
    "BIN",
    "BLOB",
    "DOC",
    "STATE",
    "TAGS",
    "GEO",
    "_CDC_POSITION", "_CDC_COMMIT_TS", "_CDC_OP", "_CDC_VALID_FROM", "_CDC_VALID_TO", "_CDC_IS_CURRENT"
)
SELECT
    "S"."ID",
    "S"."T_I8",
    "S"."T_U8",
    "S"."T_I16",
    "S"."T_U24",
    "S"."T_I32",
    "S"."T_U32",
    "S"."T_I64",
    "S"."PRICE",
    "S"."HUGE",
    "S"."F",
    "S"."D",
    "S"."FLAGS",
    "S"."B1",
    "S"."BORN",
    "S"."AT",
    "S"."AT0",
    "S"."SEEN",
    "S"."DUR",
    "S"."YR",
    "S"."CODE",
    "S"."Name Of",
    "S"."quo""te",
    "S"."BIN",
    "S"."BLOB",
    "S"."DOC",
    "S"."STATE",
    "S"."TAGS",
    "S"."GEO",
    "S"."_CDC_POSITION", "S"."_CDC_COMMIT_TS", "S"."_CDC_OP", "S"."_CDC_COMMIT_TS", NULL, TRUE
FROM (SELECT
"ID" AS "ID",
"T_I8" AS "T_I8",
"T_U8" AS "T_U8",
"T_I16" AS "T_I16",
"T_U24" AS "T_U24",
"T_I32" AS "T_I32",
"T_U32" AS "T_U32",
"T_I64" AS "T_I64",
"PRICE" AS "PRICE",
"HUGE" AS "HUGE",
"F" AS "F",
"D" AS "D",
"FLAGS" AS "FLAGS",
"B1" AS "B1",
"BORN" AS "BORN",
"AT" AS "AT",
"AT0" AS "AT0",
"SEEN" AS "SEEN",
"DUR" AS "DUR",
"YR" AS "YR",
"CODE" AS "CODE",
"Name Of" AS "Name Of",
"quo""te" AS "quo""te",
"BIN" AS "BIN",
"BLOB" AS "BLOB",
PARSE_JSON("DOC") AS "DOC",
"STATE" AS "STATE",
"TAGS" AS "TAGS",
"GEO" AS "GEO",
    "_CDC_POSITION", "_CDC_COMMIT_TS", "_CDC_OP", "METADATA$ACTION" AS "_CDC_ACTION"
FROM "_CDC_STG_RUN_1") AS "S"
WHERE "S"."_CDC_ACTION" = 'INSERT'
    AND NOT EXISTS (
        SELECT 1 FROM "EVERY_TYPE_HISTORY" AS "H"
        WHERE "H"."ID" = "S"."ID" AND "H"."_CDC_POSITION" >= "S"."_CDC_POSITION"
    );

-- history_table.sql.j2
CREATE TABLE IF NOT EXISTS "EVERY_TYPE_HISTORY" (
    "ID" NUMBER(20,0),
    "T_I8" NUMBER(3,0),
    "T_U8" NUMBER(3,0),
    "T_I16" NUMBER(5,0),
    "T_U24" NUMBER(8,0),
    "T_I32" NUMBER(10,0),
    "T_U32" NUMBER(10,0),
    "T_I64" NUMBER(19,0),
    "PRICE" NUMBER(18,4),
    "HUGE" VARCHAR,
    "F" FLOAT,
    "D" FLOAT,
    "FLAGS" NUMBER(20,0),
    "B1" NUMBER(1,0),
    "BORN" DATE,
    "AT" TIMESTAMP_NTZ(6),
    "AT0" TIMESTAMP_NTZ(0),
    "SEEN" TIMESTAMP_TZ(3),
    "DUR" VARCHAR,
    "YR" NUMBER(4,0),
    "CODE" VARCHAR,
    "Name Of" VARCHAR,
    "quo""te" VARCHAR,
    "BIN" BINARY,
    "BLOB" BINARY,
    "DOC" VARIANT,
    "STATE" VARCHAR,
    "TAGS" ARRAY,
    "GEO" BINARY,
    "_CDC_POSITION" VARCHAR NOT NULL,
    "_CDC_COMMIT_TS" TIMESTAMP_TZ(6),
    "_CDC_OP" VARCHAR(1) NOT NULL,
    "_CDC_VALID_FROM" TIMESTAMP_TZ(6),
    "_CDC_VALID_TO" TIMESTAMP_TZ(6),
    "_CDC_IS_CURRENT" BOOLEAN NOT NULL,
    PRIMARY KEY ("ID", "_CDC_POSITION")
)
COMMENT = 'cdc: replica of MySQL shop.every_type';

-- internal_stage.sql.j2
CREATE STAGE IF NOT EXISTS "_CDC_BATCHES"
    FILE_FORMAT = (TYPE = PARQUET)
    COMMENT = 'cdc snowflake-apply: Parquet batches written by spark-merge';

-- landing_table.sql.j2
CREATE TABLE IF NOT EXISTS "EVERY_TYPE_LANDING" (
    "RECORD" VARIANT NOT NULL,
    "FILE_NAME" VARCHAR NOT NULL,
    "FILE_ROW" NUMBER(19,0) NOT NULL,
    "LOADED_AT" TIMESTAMP_LTZ(6) DEFAULT CURRENT_TIMESTAMP()
);

-- merge.sql.j2
MERGE INTO "EVERY_TYPE" AS "T"
USING (SELECT
"ID" AS "ID",
"T_I8" AS "T_I8",
"T_U8" AS "T_U8",
"T_I16" AS "T_I16",
"T_U24" AS "T_U24",
"T_I32" AS "T_I32",
"T_U32" AS "T_U32",
"T_I64" AS "T_I64",
"PRICE" AS "PRICE",
"HUGE" AS "HUGE",
"F" AS "F",
"D" AS "D",
"FLAGS" AS "FLAGS",
"B1" AS "B1",
"BORN" AS "BORN",
"AT" AS "AT",
"AT0" AS "AT0",
"SEEN" AS "SEEN",
"DUR" AS "DUR",
"YR" AS "YR",
"CODE" AS "CODE",
"Name Of" AS "Name Of",
"quo""te" AS "quo""te",
"BIN" AS "BIN",
"BLOB" AS "BLOB",
PARSE_JSON("DOC") AS "DOC",
"STATE" AS "STATE",
"TAGS" AS "TAGS",
"GEO" AS "GEO",
    "_CDC_POSITION", "_CDC_COMMIT_TS", "_CDC_OP", "METADATA$ACTION" AS "_CDC_ACTION"
FROM "_CDC_STG_RUN_1") AS "S"
ON "T"."ID" = "S"."ID"
WHEN MATCHED AND "S"."_CDC_POSITION" > "T"."_CDC_POSITION" AND "S"."_CDC_ACTION" = 'DELETE' THEN DELETE
WHEN MATCHED AND "S"."_CDC_POSITION" > "T"."_CDC_POSITION" THEN UPDATE SET
    "T"."ID" = "S"."ID",
    "T"."T_I8" = "S"."T_I8",
    "T"."T_U8" = "S"."T_U8",
    "T"."T_I16" = "S"."T_I16",
    "T"."T_U24" = "S"."T_U24",
    "T"."T_I32" = "S"."T_I32",
    "T"."T_U32" = "S"."T_U32",
    "T"."T_I64" = "S"."T_I64",
    "T"."PRICE" = "S"."PRICE",
    "T"."HUGE" = "S"."HUGE",
    "T"."F" = "S"."F",
    "T"."D" = "S"."D",
    "T"."FLAGS" = "S"."FLAGS",
    "T"."B1" = "S"."B1",
    "T"."BORN" = "S"."BORN",
    "T"."AT" = "S"."AT",
    "T"."AT0" = "S"."AT0",
    "T"."SEEN" = "S"."SEEN",
    "T"."DUR" = "S"."DUR",
    "T"."YR" = "S"."YR",
    "T"."CODE" = "S"."CODE",
    "T"."Name Of" = "S"."Name Of",
    "T"."quo""te" = "S"."quo""te",
    "T"."BIN" = "S"."BIN",
    "T"."BLOB" = "S"."BLOB",
    "T"."DOC" = "S"."DOC",
    "T"."STATE" = "S"."STATE",
    "T"."TAGS" = "S"."TAGS",
    "T"."GEO" = "S"."GEO",
    "T"."_CDC_POSITION" = "S"."_CDC_POSITION",
    "T"."_CDC_COMMIT_TS" = "S"."_CDC_COMMIT_TS",
    "T"."_CDC_OP" = "S"."_CDC_OP"
WHEN NOT MATCHED AND "S"."_CDC_ACTION" = 'INSERT' THEN INSERT (
    "ID",
    "T_I8",
    "T_U8",
    "T_I16",
    "T_U24",
    "T_I32",
    "T_U32",
    "T_I64",
    "PRICE",
    "HUGE",
    "F",
    "D",
    "FLAGS",
    "B1",
    "BORN",
    "AT",
    "AT0",
    "SEEN",
    "DUR",
    "YR",
    "CODE",
    "Name Of",
    "quo""te",
    "BIN",
    "BLOB",
    "DOC",
    "STATE",
    "TAGS",
    "GEO",
    "_CDC_POSITION", "_CDC_COMMIT_TS", "_CDC_OP"
) VALUES (
    "S"."ID",
    "S"."T_I8",
    "S"."T_U8",
    "S"."T_I16",
    "S"."T_U24",
    "S"."T_I32",
    "S"."T_U32",
    "S"."T_I64",
    "S"."PRICE",
    "S"."HUGE",
    "S"."F",
    "S"."D",
    "S"."FLAGS",
    "S"."B1",
    "S"."BORN",
    "S"."AT",
    "S"."AT0",
    "S"."SEEN",
    "S"."DUR",
    "S"."YR",
    "S"."CODE",
    "S"."Name Of",
    "S"."quo""te",
    "S"."BIN",
    "S"."BLOB",
    "S"."DOC",
    "S"."STATE",
    "S"."TAGS",
    "S"."GEO",
    "S"."_CDC_POSITION", "S"."_CDC_COMMIT_TS", "S"."_CDC_OP"
);

MERGE INTO "EVERY_TYPE" AS "T"
USING (SELECT
"ID" AS "ID",
"T_I8" AS "T_I8",
"T_U8" AS "T_U8",
"T_I16" AS "T_I16",
"T_U24" AS "T_U24",
"T_I32" AS "T_I32",
"T_U32" AS "T_U32",
"T_I64" AS "T_I64",
"PRICE" AS "PRICE",
"HUGE" AS "HUGE",
"F" AS "F",
"D" AS "D",
"FLAGS" AS "FLAGS",
"B1" AS "B1",
"BORN" AS "BORN",
"AT" AS "AT",
"AT0" AS "AT0",
"SEEN" AS "SEEN",
"DUR" AS "DUR",
"YR" AS "YR",
"CODE" AS "CODE",
"Name Of" AS "Name Of",
"quo""te" AS "quo""te",
"BIN" AS "BIN",
"BLOB" AS "BLOB",
PARSE_JSON("DOC") AS "DOC",
"STATE" AS "STATE",
"TAGS" AS "TAGS",
"GEO" AS "GEO",
    "_CDC_POSITION", "_CDC_COMMIT_TS", "_CDC_OP", "METADATA$ACTION" AS "_CDC_ACTION"
FROM "_CDC_STG_RUN_1") AS "S"
ON "T"."ID" = "S"."ID"
WHEN MATCHED AND "S"."_CDC_POSITION" > "T"."_CDC_POSITION" AND "S"."_CDC_ACTION" = 'DELETE' THEN UPDATE SET
    "T"."_CDC_DELETED" = TRUE,
    "T"."_CDC_DELETED_AT" = "S"."_CDC_COMMIT_TS",
    "T"."_CDC_POSITION" = "S"."_CDC_POSITION",
    "T"."_CDC_COMMIT_TS" = "S"."_CDC_COMMIT_TS",
    "T"."_CDC_OP" = "S"."_CDC_OP"
WHEN MATCHED AND "S"."_CDC_POSITION" > "T"."_CDC_POSITION" THEN UPDATE SET
    "T"."ID" = "S"."ID",
    "T"."T_I8" = "S"."T_I8",
    "T"."T_U8" = "S"."T_U8",
    "T"."T_I16" = "S"."T_I16",
    "T"."T_U24" = "S"."T_U24",
    "T"."T_I32" = "S"."T_I32",
    "T"."T_U32" = "S"."T_U32",
    "T"."T_I64" = "S"."T_I64",
    "T"."PRICE" = "S"."PRICE",
    "T"."HUGE" = "S"."HUGE",
    "T"."F" = "S"."F",
    "T"."D" = "S"."D",
    "T"."FLAGS" = "S"."FLAGS",
    "T"."B1" = "S"."B1",
    "T"."BORN" = "S"."BORN",
    "T"."AT" = "S"."AT",
    "T"."AT0" = "S"."AT0",
    "T"."SEEN" = "S"."SEEN",
    "T"."DUR" = "S"."DUR",
    "T"."YR" = "S"."YR",
    "T"."CODE" = "S"."CODE",
    "T"."Name Of" = "S"."Name Of",
    "T"."quo""te" = "S"."quo""te",
    "T"."BIN" = "S"."BIN",
    "T"."BLOB" = "S"."BLOB",
    "T"."DOC" = "S"."DOC",
    "T"."STATE" = "S"."STATE",
    "T"."TAGS" = "S"."TAGS",
    "T"."GEO" = "S"."GEO",
    "T"."_CDC_DELETED" = FALSE,
    "T"."_CDC_DELETED_AT" = NULL,
    "T"."_CDC_POSITION" = "S"."_CDC_POSITION",
    "T"."_CDC_COMMIT_TS" = "S"."_CDC_COMMIT_TS",
    "T"."_CDC_OP" = "S"."_CDC_OP"
WHEN NOT MATCHED AND "S"."_CDC_ACTION" = 'INSERT' THEN INSERT (
    "ID",
    "T_I8",
    "T_U8",
    "T_I16",
    "T_U24",
    "T_I32",
    "T_U32",
    "T_I64",
    "PRICE",
    "HUGE",
    "F",
    "D",
    "FLAGS",
    "B1",
    "BORN",
    "AT",
    "AT0",
    "SEEN",
    "DUR",
    "YR",
    "CODE",
    "Name Of",
    "quo""te",
    "BIN",
    "BLOB",
    "DOC",
    "STATE",
    "TAGS",
    "GEO",
    "_CDC_DELETED",
    "_CDC_POSITION", "_CDC_COMMIT_TS", "_CDC_OP"
) VALUES (
    "S"."ID",
    "S"."T_I8",
    "S"."T_U8",
    "S"."T_I16",
    "S"."T_U24",
    "S"."T_I32",
    "S"."T_U32",
    "S"."T_I64",
    "S"."PRICE",
    "S"."HUGE",
    "S"."F",
    "S"."D",
    "S"."FLAGS",
    "S"."B1",
    "S"."BORN",
    "S"."AT",
    "S"."AT0",
    "S"."SEEN",
    "S"."DUR",
    "S"."YR",
    "S"."CODE",
    "S"."Name Of",
    "S"."quo""te",
    "S"."BIN",
    "S"."BLOB",
    "S"."DOC",
    "S"."STATE",
    "S"."TAGS",
    "S"."GEO",
    FALSE,
    "S"."_CDC_POSITION", "S"."_CDC_COMMIT_TS", "S"."_CDC_OP"
);

-- pipe.sql.j2
CREATE PIPE IF NOT EXISTS "EVERY_TYPE_PIPE"
    AUTO_INGEST = TRUE
    AS COPY INTO "EVERY_TYPE_LANDING" ("RECORD", "FILE_NAME", "FILE_ROW")
    FROM (SELECT $1, METADATA$FILENAME, METADATA$FILE_ROW_NUMBER FROM @"_CDC_CHANGES"/table=shop.every_type/)
    FILE_FORMAT = (FORMAT_NAME = "_CDC_JSON_GZIP");

-- rename_column.sql.j2
ALTER TABLE "EVERY_TYPE" RENAME COLUMN "OLD" TO "NEW";

-- replace_rows.sql.j2
DELETE FROM "EVERY_TYPE" AS "T"
USING (SELECT
"ID" AS "ID",
"T_I8" AS "T_I8",
"T_U8" AS "T_U8",
"T_I16" AS "T_I16",
"T_U24" AS "T_U24",
"T_I32" AS "T_I32",
"T_U32" AS "T_U32",
"T_I64" AS "T_I64",
"PRICE" AS "PRICE",
"HUGE" AS "HUGE",
"F" AS "F",
"D" AS "D",
"FLAGS" AS "FLAGS",
"B1" AS "B1",
"BORN" AS "BORN",
"AT" AS "AT",
"AT0" AS "AT0",
"SEEN" AS "SEEN",
"DUR" AS "DUR",
"YR" AS "YR",
"CODE" AS "CODE",
"Name Of" AS "Name Of",
"quo""te" AS "quo""te",
"BIN" AS "BIN",
"BLOB" AS "BLOB",
PARSE_JSON("DOC") AS "DOC",
"STATE" AS "STATE",
"TAGS" AS "TAGS",
"GEO" AS "GEO",
    "_CDC_POSITION", "_CDC_COMMIT_TS", "_CDC_OP", "METADATA$ACTION" AS "_CDC_ACTION"
FROM "_CDC_STG_RUN_1") AS "S"
WHERE TRUE
    AND ("T"."ID" = "S"."ID" OR ("T"."ID" IS NULL AND "S"."ID" IS NULL))
    AND ("T"."T_I8" = "S"."T_I8" OR ("T"."T_I8" IS NULL AND "S"."T_I8" IS NULL))
    AND ("T"."T_U8" = "S"."T_U8" OR ("T"."T_U8" IS NULL AND "S"."T_U8" IS NULL))
    AND ("T"."T_I16" = "S"."T_I16" OR ("T"."T_I16" IS NULL AND "S"."T_I16" IS NULL))
    AND ("T"."T_U24" = "S"."T_U24" OR ("T"."T_U24" IS NULL AND "S"."T_U24" IS NULL))
    AND ("T"."T_I32" = "S"."T_I32" OR ("T"."T_I32" IS NULL AND "S"."T_I32" IS NULL))
    AND ("T"."T_U32" = "S"."T_U32" OR ("T"."T_U32" IS NULL AND "S"."T_U32" IS NULL))
    AND ("T"."T_I64" = "S"."T_I64" OR ("T"."T_I64" IS NULL AND "S"."T_I64" IS NULL))
    AND ("T"."PRICE" = "S"."PRICE" OR ("T"."PRICE" IS NULL AND "S"."PRICE" IS NULL))
    AND ("T"."HUGE" = "S"."HUGE" OR ("T"."HUGE" IS NULL AND "S"."HUGE" IS NULL))
    AND ("T"."F" = "S"."F" OR ("T"."F" IS NULL AND "S"."F" IS NULL))
    AND ("T"."D" = "S"."D" OR ("T"."D" IS NULL AND "S"."D" IS NULL))
    AND ("T"."FLAGS" = "S"."FLAGS" OR ("T"."FLAGS" IS NULL AND "S"."FLAGS" IS NULL))
    AND ("T"."B1" = "S"."B1" OR ("T"."B1" IS NULL AND "S"."B1" IS NULL))
    AND ("T"."BORN" = "S"."BORN" OR ("T"."BORN" IS NULL AND "S"."BORN" IS NULL))
    AND ("T"."AT" = "S"."AT" OR ("T"."AT" IS NULL AND "S"."AT" IS NULL))
    AND ("T"."AT0" = "S"."AT0" OR ("T"."AT0" IS NULL AND "S"."AT0" IS NULL))
    AND ("T"."SEEN" = "S"."SEEN" OR ("T"."SEEN" IS NULL AND "S"."SEEN" IS NULL))
    AND ("T"."DUR" = "S"."DUR" OR ("T"."DUR" IS NULL AND "S"."DUR" IS NULL))
    AND ("T"."YR" = "S"."YR" OR ("T"."YR" IS NULL AND "S"."YR" IS NULL))
    AND ("T"."CODE" = "S"."CODE" OR ("T"."CODE" IS NULL AND "S"."CODE" IS NULL))
    AND ("T"."Name Of" = "S"."Name Of" OR ("T"."Name Of" IS NULL AND "S"."Name Of" IS NULL))
    AND ("T"."quo""te" = "S"."quo""te" OR ("T"."quo""te" IS NULL AND "S"."quo""te" IS NULL))
    AND ("T"."BIN" = "S"."BIN" OR ("T"."BIN" IS NULL AND "S"."BIN" IS NULL))
    AND ("T"."BLOB" = "S"."BLOB" OR ("T"."BLOB" IS NULL AND "S"."BLOB" IS NULL))
    AND ("T"."DOC" = "S"."DOC" OR ("T"."DOC" IS NULL AND "S"."DOC" IS NULL))
    AND ("T"."STATE" = "S"."STATE" OR ("T"."STATE" IS NULL AND "S"."STATE" IS NULL))
    AND ("T"."TAGS" = "S"."TAGS" OR ("T"."TAGS" IS NULL AND "S"."TAGS" IS NULL))
    AND ("T"."GEO" = "S"."GEO" OR ("T"."GEO" IS NULL AND "S"."GEO" IS NULL));

INSERT INTO "EVERY_TYPE" (
    "ID",
    "T_I8",
    "T_U8",
    "T_I16",
    "T_U24",
    "T_I32",
    "T_U32",
    "T_I64",
    "PRICE",
    "HUGE",
    "F",
    "D",
    "FLAGS",
    "B1",
    "BORN",
    "AT",
    "AT0",
    "SEEN",
    "DUR",
    "YR",
    "CODE",
    "Name Of",
    "quo""te",
    "BIN",
    "BLOB",
    "DOC",
    "STATE",
    "TAGS",
    "GEO",
    "_CDC_POSITION", "_CDC_COMMIT_TS", "_CDC_OP"
)
SELECT
    "S"."ID",
    "S"."T_I8",
    "S"."T_U8",
    "S"."T_I16",
    "S"."T_U24",
    "S"."T_I32",
    "S"."T_U32",
    "S"."T_I64",
    "S"."PRICE",
    "S"."HUGE",
    "S"."F",
    "S"."D",
    "S"."FLAGS",
    "S"."B1",
    "S"."BORN",
    "S"."AT",
    "S"."AT0",
    "S"."SEEN",
    "S"."DUR",
    "S"."YR",
    "S"."CODE",
    "S"."Name Of",
    "S"."quo""te",
    "S"."BIN",
    "S"."BLOB",
    "S"."DOC",
    "S"."STATE",
    "S"."TAGS",
    "S"."GEO",
    "S"."_CDC_POSITION", "S"."_CDC_COMMIT_TS", "S"."_CDC_OP"
FROM (SELECT
"ID" AS "ID",
"T_I8" AS "T_I8",
"T_U8" AS "T_U8",
"T_I16" AS "T_I16",
"T_U24" AS "T_U24",
"T_I32" AS "T_I32",
"T_U32" AS "T_U32",
"T_I64" AS "T_I64",
"PRICE" AS "PRICE",
"HUGE" AS "HUGE",
"F" AS "F",
"D" AS "D",
"FLAGS" AS "FLAGS",
"B1" AS "B1",
"BORN" AS "BORN",
"AT" AS "AT",
"AT0" AS "AT0",
"SEEN" AS "SEEN",
"DUR" AS "DUR",
"YR" AS "YR",
"CODE" AS "CODE",
"Name Of" AS "Name Of",
"quo""te" AS "quo""te",
"BIN" AS "BIN",
"BLOB" AS "BLOB",
PARSE_JSON("DOC") AS "DOC",
"STATE" AS "STATE",
"TAGS" AS "TAGS",
"GEO" AS "GEO",
    "_CDC_POSITION", "_CDC_COMMIT_TS", "_CDC_OP", "METADATA$ACTION" AS "_CDC_ACTION"
FROM "_CDC_STG_RUN_1") AS "S"
WHERE "S"."_CDC_ACTION" = 'INSERT';

-- schema.sql.j2
CREATE SCHEMA IF NOT EXISTS "REPLICA";

-- shorten_column.sql.j2
UPDATE "EVERY_TYPE_HISTORY" SET "NAME" = LEFT("NAME", 4) WHERE LENGTH("NAME") > 4 AND "_CDC_IS_CURRENT";

-- storage_integration.sql.j2
CREATE STORAGE INTEGRATION IF NOT EXISTS "CDC_S3"
    TYPE = EXTERNAL_STAGE
    STORAGE_PROVIDER = 'S3'
    ENABLED = TRUE
    STORAGE_AWS_ROLE_ARN = 'arn:aws:iam::123456789012:role/snowflake'
    STORAGE_ALLOWED_LOCATIONS = ('s3://bucket/cdc/');

-- stream.sql.j2
CREATE STREAM IF NOT EXISTS "EVERY_TYPE_STREAM" ON TABLE "EVERY_TYPE_LANDING" APPEND_ONLY = TRUE;

-- target_table.sql.j2
CREATE TABLE IF NOT EXISTS "EVERY_TYPE" (
    "ID" NUMBER(20,0) NOT NULL,
    "T_I8" NUMBER(3,0),
    "T_U8" NUMBER(3,0),
    "T_I16" NUMBER(5,0),
    "T_U24" NUMBER(8,0),
    "T_I32" NUMBER(10,0),
    "T_U32" NUMBER(10,0),
    "T_I64" NUMBER(19,0),
    "PRICE" NUMBER(18,4),
    "HUGE" VARCHAR,
    "F" FLOAT,
    "D" FLOAT,
    "FLAGS" NUMBER(20,0),
    "B1" NUMBER(1,0),
    "BORN" DATE,
    "AT" TIMESTAMP_NTZ(6),
    "AT0" TIMESTAMP_NTZ(0),
    "SEEN" TIMESTAMP_TZ(3),
    "DUR" VARCHAR,
    "YR" NUMBER(4,0),
    "CODE" VARCHAR,
    "Name Of" VARCHAR,
    "quo""te" VARCHAR,
    "BIN" BINARY,
    "BLOB" BINARY,
    "DOC" VARIANT,
    "STATE" VARCHAR,
    "TAGS" ARRAY,
    "GEO" BINARY,
    "_CDC_POSITION" VARCHAR NOT NULL,
    "_CDC_COMMIT_TS" TIMESTAMP_TZ(6),
    "_CDC_OP" VARCHAR(1) NOT NULL,
    "_CDC_DELETED" BOOLEAN,
    "_CDC_DELETED_AT" TIMESTAMP_TZ(6),
    PRIMARY KEY ("ID")
)
COMMENT = 'cdc: replica of MySQL shop.every_type';

-- task.sql.j2
CREATE TASK IF NOT EXISTS "EVERY_TYPE_APPLY"
    WAREHOUSE = "ETL"
    SCHEDULE = '1 MINUTE'
    WHEN SYSTEM$STREAM_HAS_DATA('"EVERY_TYPE_STREAM"')
    AS
BEGIN
    BEGIN TRANSACTION;
UPDATE "EVERY_TYPE_HISTORY" AS "H"
SET "_CDC_VALID_TO" = "S"."_CDC_COMMIT_TS", "_CDC_IS_CURRENT" = FALSE
FROM (SELECT
    "IMG":"id"::NUMBER(20,0) AS "ID",
    "IMG":"t_i8"::NUMBER(3,0) AS "T_I8",
    "IMG":"t_u8"::NUMBER(3,0) AS "T_U8",
    "IMG":"t_i16"::NUMBER(5,0) AS "T_I16",
    "IMG":"t_u24"::NUMBER(8,0) AS "T_U24",
    "IMG":"t_i32"::NUMBER(10,0) AS "T_I32",
    "IMG":"t_u32"::NUMBER(10,0) AS "T_U32",
    "IMG":"t_i64"::NUMBER(19,0) AS "T_I64",
    "IMG":"price"::NUMBER(18,4) AS "PRICE",
    "IMG":"huge"::VARCHAR AS "HUGE",
    "IMG":"f"::FLOAT AS "F",
    "IMG":"d"::FLOAT AS "D",
    "IMG":"flags"::NUMBER(20,0) AS "FLAGS",
    "IMG":"b1"::NUMBER(1,0) AS "B1",
    COALESCE(TRY_TO_DATE("IMG":"born"::VARCHAR), '0001-01-01'::DATE) AS "BORN",
    TRY_TO_TIMESTAMP_NTZ("IMG":"at"::VARCHAR)::TIMESTAMP_NTZ(6) AS "AT",
    TRY_TO_TIMESTAMP_NTZ("IMG":"at0"::VARCHAR)::TIMESTAMP_NTZ(0) AS "AT0",
    TRY_TO_TIMESTAMP_TZ("IMG":"seen"::VARCHAR)::TIMESTAMP_TZ(3) AS "SEEN",
    "IMG":"dur"::VARCHAR AS "DUR",
    "IMG":"yr"::NUMBER(4,0) AS "YR",
    "IMG":"code"::VARCHAR AS "CODE",
    "IMG":"Name Of"::VARCHAR AS "Name Of",
    "IMG":"quo""te"::VARCHAR AS "quo""te",
    BASE64_DECODE_BINARY("IMG":"bin"::VARCHAR) AS "BIN",
    BASE64_DECODE_BINARY("IMG":"blob"::VARCHAR) AS "BLOB",
    PARSE_JSON("IMG":"doc"::VARCHAR) AS "DOC",
    "IMG":"state"::VARCHAR AS "STATE",
    "IMG":"tags"::ARRAY AS "TAGS",
    BASE64_DECODE_BINARY("IMG":"geo"::VARCHAR) AS "GEO",
    "P" AS "_CDC_POSITION",
    TRY_TO_TIMESTAMP_TZ("R":"ts"::VARCHAR) AS "_CDC_COMMIT_TS",
    "R":"op"::VARCHAR AS "_CDC_OP",
    "ACTION" AS "_CDC_ACTION"
FROM (
    SELECT "R", "P", "R":"after" AS "IMG", 'INSERT' AS "ACTION" FROM (
        SELECT "RECORD" AS "R", "RECORD":"position"::VARCHAR AS "P" FROM "EVERY_TYPE_STREAM"
        WHERE "RECORD":"op"::VARCHAR IN ('c', 'u', 'r', 'd')
        QUALIFY ROW_NUMBER() OVER (PARTITION BY "P" ORDER BY "FILE_NAME", "FILE_ROW") = 1
    ) WHERE "R":"op"::VARCHAR <> 'd'
    UNION ALL
    SELECT "R", "P", "R":"before" AS "IMG", 'DELETE' AS "ACTION" FROM (
        SELECT "RECORD" AS "R", "RECORD":"position"::VARCHAR AS "P" FROM "EVERY_TYPE_STREAM"
        WHERE "RECORD":"op"::VARCHAR IN ('u', 'd')
        QUALIFY ROW_NUMBER() OVER (PARTITION BY "P" ORDER BY "FILE_NAME", "FILE_ROW") = 1
    ) WHERE "R":"op"::VARCHAR = 'd' OR NOT ("R":"before":"id"::NUMBER(20,0) = "R":"after":"id"::NUMBER(20,0))
)
QUALIFY ROW_NUMBER() OVER (PARTITION BY "IMG":"id"::NUMBER(20,0) ORDER BY "P" DESC) = 1) AS "S"
WHERE "H"."ID" = "S"."ID"
    AND "H"."_CDC_IS_CURRENT"
    AND "H"."_CDC_POSITION" < "S"."_CDC_POSITION";
INSERT INTO "EVERY_TYPE_HISTORY" (
    "ID",
    "T_I8",
    "T_U8",
    "T_I16",
    "T_U24",
    "T_I32",
    "T_U32",
    "T_I64",
    "PRICE",
    "HUGE",
    "F",
    "D",
    "FLAGS",
    "B1",
    "BORN",
    "AT",
    "AT0",
    "SEEN",
    "DUR",
    "YR",
    "CODE",
    "Name Of",
    "quo""te",
    "BIN",
    "BLOB",
    "DOC",
    "STATE",
    "TAGS",
    "GEO",
    "_CDC_POSITION", "_CDC_COMMIT_TS", "_CDC_OP", "_CDC_VALID_FROM", "_CDC_VALID_TO", "_CDC_IS_CURRENT"
)
SELECT
    "S"."ID",
    "S"."T_I8",
    "S"."T_U8",
    "S"."T_I16",
    "S"."T_U24",
    "S"."T_I32",
    "S"."T_U32",
    "S"."T_I64",
    "S"."PRICE",
    "S"."HUGE",
    "S"."F",
    "S"."D",
    "S"."FLAGS",
    "S"."B1",
    "S"."BORN",
    "S"."AT",
    "S"."AT0",
    "S"."SEEN",
    "S"."DUR",
    "S"."YR",
    "S"."CODE",
    "S"."Name Of",
    "S"."quo""te",
    "S"."BIN",
    "S"."BLOB",
    "S"."DOC",
    "S"."STATE",
    "S"."TAGS",
    "S"."GEO",
    "S"."_CDC_POSITION", "S"."_CDC_COMMIT_TS", "S"."_CDC_OP", "S"."_CDC_COMMIT_TS", NULL, TRUE
FROM (SELECT
    "IMG":"id"::NUMBER(20,0) AS "ID",
    "IMG":"t_i8"::NUMBER(3,0) AS "T_I8",
    "IMG":"t_u8"::NUMBER(3,0) AS "T_U8",
    "IMG":"t_i16"::NUMBER(5,0) AS "T_I16",
    "IMG":"t_u24"::NUMBER(8,0) AS "T_U24",
    "IMG":"t_i32"::NUMBER(10,0) AS "T_I32",
    "IMG":"t_u32"::NUMBER(10,0) AS "T_U32",
    "IMG":"t_i64"::NUMBER(19,0) AS "T_I64",
    "IMG":"price"::NUMBER(18,4) AS "PRICE",
    "IMG":"huge"::VARCHAR AS "HUGE",
    "IMG":"f"::FLOAT AS "F",
    "IMG":"d"::FLOAT AS "D",
    "IMG":"flags"::NUMBER(20,0) AS "FLAGS",
    "IMG":"b1"::NUMBER(1,0) AS "B1",
    COALESCE(TRY_TO_DATE("IMG":"born"::VARCHAR), '0001-01-01'::DATE) AS "BORN",
    TRY_TO_TIMESTAMP_NTZ("IMG":"at"::VARCHAR)::TIMESTAMP_NTZ(6) AS "AT",
    TRY_TO_TIMESTAMP_NTZ("IMG":"at0"::VARCHAR)::TIMESTAMP_NTZ(0) AS "AT0",
    TRY_TO_TIMESTAMP_TZ("IMG":"seen"::VARCHAR)::TIMESTAMP_TZ(3) AS "SEEN",
    "IMG":"dur"::VARCHAR AS "DUR",
    "IMG":"yr"::NUMBER(4,0) AS "YR",
    "IMG":"code"::VARCHAR AS "CODE",
    "IMG":"Name Of"::VARCHAR AS "Name Of",
    "IMG":"quo""te"::VARCHAR AS "quo""te",
    BASE64_DECODE_BINARY("IMG":"bin"::VARCHAR) AS "BIN",
    BASE64_DECODE_BINARY("IMG":"blob"::VARCHAR) AS "BLOB",
    PARSE_JSON("IMG":"doc"::VARCHAR) AS "DOC",
    "IMG":"state"::VARCHAR AS "STATE",
    "IMG":"tags"::ARRAY AS "TAGS",
    BASE64_DECODE_BINARY("IMG":"geo"::VARCHAR) AS "GEO",
    "P" AS "_CDC_POSITION",
    TRY_TO_TIMESTAMP_TZ("R":"ts"::VARCHAR) AS "_CDC_COMMIT_TS",
    "R":"op"::VARCHAR AS "_CDC_OP",
    "ACTION" AS "_CDC_ACTION"
FROM (
    SELECT "R", "P", "R":"after" AS "IMG", 'INSERT' AS "ACTION" FROM (
        SELECT "RECORD" AS "R", "RECORD":"position"::VARCHAR AS "P" FROM "EVERY_TYPE_STREAM"
        WHERE "RECORD":"op"::VARCHAR IN ('c', 'u', 'r', 'd')
        QUALIFY ROW_NUMBER() OVER (PARTITION BY "P" ORDER BY "FILE_NAME", "FILE_ROW") = 1
    ) WHERE "R":"op"::VARCHAR <> 'd'
    UNION ALL
    SELECT "R", "P", "R":"before" AS "IMG", 'DELETE' AS "ACTION" FROM (
        SELECT "RECORD" AS "R", "RECORD":"position"::VARCHAR AS "P" FROM "EVERY_TYPE_STREAM"
        WHERE "RECORD":"op"::VARCHAR IN ('u', 'd')
        QUALIFY ROW_NUMBER() OVER (PARTITION BY "P" ORDER BY "FILE_NAME", "FILE_ROW") = 1
    ) WHERE "R":"op"::VARCHAR = 'd' OR NOT ("R":"before":"id"::NUMBER(20,0) = "R":"after":"id"::NUMBER(20,0))
)
QUALIFY ROW_NUMBER() OVER (PARTITION BY "IMG":"id"::NUMBER(20,0) ORDER BY "P" DESC) = 1) AS "S"
WHERE "S"."_CDC_ACTION" = 'INSERT'
    AND NOT EXISTS (
        SELECT 1 FROM "EVERY_TYPE_HISTORY" AS "H"
        WHERE "H"."ID" = "S"."ID" AND "H"."_CDC_POSITION" >= "S"."_CDC_POSITION"
    );
MERGE INTO "EVERY_TYPE" AS "T"
USING (SELECT
    "IMG":"id"::NUMBER(20,0) AS "ID",
    "IMG":"t_i8"::NUMBER(3,0) AS "T_I8",
    "IMG":"t_u8"::NUMBER(3,0) AS "T_U8",
    "IMG":"t_i16"::NUMBER(5,0) AS "T_I16",
    "IMG":"t_u24"::NUMBER(8,0) AS "T_U24",
    "IMG":"t_i32"::NUMBER(10,0) AS "T_I32",
    "IMG":"t_u32"::NUMBER(10,0) AS "T_U32",
    "IMG":"t_i64"::NUMBER(19,0) AS "T_I64",
    "IMG":"price"::NUMBER(18,4) AS "PRICE",
    "IMG":"huge"::VARCHAR AS "HUGE",
    "IMG":"f"::FLOAT AS "F",
    "IMG":"d"::FLOAT AS "D",
    "IMG":"flags"::NUMBER(20,0) AS "FLAGS",
    "IMG":"b1"::NUMBER(1,0) AS "B1",
    COALESCE(TRY_TO_DATE("IMG":"born"::VARCHAR), '0001-01-01'::DATE) AS "BORN",
    TRY_TO_TIMESTAMP_NTZ("IMG":"at"::VARCHAR)::TIMESTAMP_NTZ(6) AS "AT",
    TRY_TO_TIMESTAMP_NTZ("IMG":"at0"::VARCHAR)::TIMESTAMP_NTZ(0) AS "AT0",
    TRY_TO_TIMESTAMP_TZ("IMG":"seen"::VARCHAR)::TIMESTAMP_TZ(3) AS "SEEN",
    "IMG":"dur"::VARCHAR AS "DUR",
    "IMG":"yr"::NUMBER(4,0) AS "YR",
    "IMG":"code"::VARCHAR AS "CODE",
    "IMG":"Name Of"::VARCHAR AS "Name Of",
    "IMG":"quo""te"::VARCHAR AS "quo""te",
    BASE64_DECODE_BINARY("IMG":"bin"::VARCHAR) AS "BIN",
    BASE64_DECODE_BINARY("IMG":"blob"::VARCHAR) AS "BLOB",
    PARSE_JSON("IMG":"doc"::VARCHAR) AS "DOC",
    "IMG":"state"::VARCHAR AS "STATE",
    "IMG":"tags"::ARRAY AS "TAGS",
    BASE64_DECODE_BINARY("IMG":"geo"::VARCHAR) AS "GEO",
    "P" AS "_CDC_POSITION",
    TRY_TO_TIMESTAMP_TZ("R":"ts"::VARCHAR) AS "_CDC_COMMIT_TS",
    "R":"op"::VARCHAR AS "_CDC_OP",
    "ACTION" AS "_CDC_ACTION"
FROM (
    SELECT "R", "P", "R":"after" AS "IMG", 'INSERT' AS "ACTION" FROM (
        SELECT "RECORD" AS "R", "RECORD":"position"::VARCHAR AS "P" FROM "EVERY_TYPE_STREAM"
        WHERE "RECORD":"op"::VARCHAR IN ('c', 'u', 'r', 'd')
        QUALIFY ROW_NUMBER() OVER (PARTITION BY "P" ORDER BY "FILE_NAME", "FILE_ROW") = 1
    ) WHERE "R":"op"::VARCHAR <> 'd'
    UNION ALL
    SELECT "R", "P", "R":"before" AS "IMG", 'DELETE' AS "ACTION" FROM (
        SELECT "RECORD" AS "R", "RECORD":"position"::VARCHAR AS "P" FROM "EVERY_TYPE_STREAM"
        WHERE "RECORD":"op"::VARCHAR IN ('u', 'd')
        QUALIFY ROW_NUMBER() OVER (PARTITION BY "P" ORDER BY "FILE_NAME", "FILE_ROW") = 1
    ) WHERE "R":"op"::VARCHAR = 'd' OR NOT ("R":"before":"id"::NUMBER(20,0) = "R":"after":"id"::NUMBER(20,0))
)
QUALIFY ROW_NUMBER() OVER (PARTITION BY "IMG":"id"::NUMBER(20,0) ORDER BY "P" DESC) = 1) AS "S"
ON "T"."ID" = "S"."ID"
WHEN MATCHED AND "S"."_CDC_POSITION" > "T"."_CDC_POSITION" AND "S"."_CDC_ACTION" = 'DELETE' THEN UPDATE SET
    "T"."_CDC_DELETED" = TRUE,
    "T"."_CDC_DELETED_AT" = "S"."_CDC_COMMIT_TS",
    "T"."_CDC_POSITION" = "S"."_CDC_POSITION",
    "T"."_CDC_COMMIT_TS" = "S"."_CDC_COMMIT_TS",
    "T"."_CDC_OP" = "S"."_CDC_OP"
WHEN MATCHED AND "S"."_CDC_POSITION" > "T"."_CDC_POSITION" THEN UPDATE SET
    "T"."ID" = "S"."ID",
    "T"."T_I8" = "S"."T_I8",
    "T"."T_U8" = "S"."T_U8",
    "T"."T_I16" = "S"."T_I16",
    "T"."T_U24" = "S"."T_U24",
    "T"."T_I32" = "S"."T_I32",
    "T"."T_U32" = "S"."T_U32",
    "T"."T_I64" = "S"."T_I64",
    "T"."PRICE" = "S"."PRICE",
    "T"."HUGE" = "S"."HUGE",
    "T"."F" = "S"."F",
    "T"."D" = "S"."D",
    "T"."FLAGS" = "S"."FLAGS",
    "T"."B1" = "S"."B1",
    "T"."BORN" = "S"."BORN",
    "T"."AT" = "S"."AT",
    "T"."AT0" = "S"."AT0",
    "T"."SEEN" = "S"."SEEN",
    "T"."DUR" = "S"."DUR",
    "T"."YR" = "S"."YR",
    "T"."CODE" = "S"."CODE",
    "T"."Name Of" = "S"."Name Of",
    "T"."quo""te" = "S"."quo""te",
    "T"."BIN" = "S"."BIN",
    "T"."BLOB" = "S"."BLOB",
    "T"."DOC" = "S"."DOC",
    "T"."STATE" = "S"."STATE",
    "T"."TAGS" = "S"."TAGS",
    "T"."GEO" = "S"."GEO",
    "T"."_CDC_DELETED" = FALSE,
    "T"."_CDC_DELETED_AT" = NULL,
    "T"."_CDC_POSITION" = "S"."_CDC_POSITION",
    "T"."_CDC_COMMIT_TS" = "S"."_CDC_COMMIT_TS",
    "T"."_CDC_OP" = "S"."_CDC_OP"
WHEN NOT MATCHED AND "S"."_CDC_ACTION" = 'INSERT' THEN INSERT (
    "ID",
    "T_I8",
    "T_U8",
    "T_I16",
    "T_U24",
    "T_I32",
    "T_U32",
    "T_I64",
    "PRICE",
    "HUGE",
    "F",
    "D",
    "FLAGS",
    "B1",
    "BORN",
    "AT",
    "AT0",
    "SEEN",
    "DUR",
    "YR",
    "CODE",
    "Name Of",
    "quo""te",
    "BIN",
    "BLOB",
    "DOC",
    "STATE",
    "TAGS",
    "GEO",
    "_CDC_DELETED",
    "_CDC_POSITION", "_CDC_COMMIT_TS", "_CDC_OP"
) VALUES (
    "S"."ID",
    "S"."T_I8",
    "S"."T_U8",
    "S"."T_I16",
    "S"."T_U24",
    "S"."T_I32",
    "S"."T_U32",
    "S"."T_I64",
    "S"."PRICE",
    "S"."HUGE",
    "S"."F",
    "S"."D",
    "S"."FLAGS",
    "S"."B1",
    "S"."BORN",
    "S"."AT",
    "S"."AT0",
    "S"."SEEN",
    "S"."DUR",
    "S"."YR",
    "S"."CODE",
    "S"."Name Of",
    "S"."quo""te",
    "S"."BIN",
    "S"."BLOB",
    "S"."DOC",
    "S"."STATE",
    "S"."TAGS",
    "S"."GEO",
    FALSE,
    "S"."_CDC_POSITION", "S"."_CDC_COMMIT_TS", "S"."_CDC_OP"
);
    COMMIT;
END;

-- task_resume.sql.j2
ALTER TASK "EVERY_TYPE_APPLY" RESUME;
