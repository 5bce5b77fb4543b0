-- The database examples/sqoop's workflows import from (README.md beside this file).
-- Run it as a PostgreSQL superuser in a new database: createdb geo && psql -d geo -f geo.sql
CREATE TABLE cities (id int PRIMARY KEY, name text NOT NULL, population int NOT NULL);
INSERT INTO cities VALUES (1, 'Lyon', 522250), (2, 'Nantes', 320732), (3, 'Brest', 139926);
-- The role the imports connect as: it may read this table and nothing else. Its password
-- is written again only in the file the workflows' passwordFile names.
CREATE ROLE reader LOGIN PASSWORD 'reader-pw';
GRANT SELECT ON cities TO reader;
