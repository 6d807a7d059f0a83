"""What a well-known dependency is for: a web framework, a database driver, a test runner.

A dependency line says only that a package is required; this table says what that package
is, so ``fastapi>=0.110`` in ``pyproject.toml`` also yields "built with fastapi". Only
packages whose one purpose is the role are listed (an ORM is not a driver, a utility that
happens to ship a test helper is not a test runner); anything else yields the dependency
fact alone. Names are each ecosystem's canonical spelling (PyPI names normalized as PEP
503 does, npm names as written, Go module paths without their major-version suffix, Maven
coordinates as ``groupId:artifactId``).
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from vera.harvest.facts import DEPENDENCIES, Document, Fact

FRAMEWORK, DATABASE_DRIVER, TEST_RUNNER = "built_with", "uses_database_driver", "uses_test_runner"

_PYTHON = {
    FRAMEWORK: {"django", "flask", "fastapi", "starlette", "tornado", "aiohttp", "pyramid",
                "sanic", "litestar", "quart", "falcon", "bottle", "grpcio"},
    DATABASE_DRIVER: {"psycopg", "psycopg2", "psycopg2-binary", "asyncpg", "pymysql",
                      "mysqlclient", "mysql-connector-python", "aiomysql", "pymongo", "motor",
                      "redis", "cassandra-driver", "oracledb", "cx-oracle", "pyodbc",
                      "aiosqlite", "clickhouse-driver", "elasticsearch", "neo4j"},
    TEST_RUNNER: {"pytest", "nose2", "nose", "ward"},
}
_NODE = {
    FRAMEWORK: {"express", "koa", "fastify", "@nestjs/core", "next", "nuxt", "react", "vue",
                "@angular/core", "svelte", "@sveltejs/kit", "@hapi/hapi", "hapi",
                "@remix-run/node", "astro", "hono", "electron"},
    DATABASE_DRIVER: {"pg", "mysql", "mysql2", "mongodb", "redis", "ioredis", "sqlite3",
                      "better-sqlite3", "tedious", "oracledb", "cassandra-driver",
                      "@elastic/elasticsearch", "neo4j-driver", "postgres"},
    TEST_RUNNER: {"jest", "mocha", "vitest", "ava", "jasmine", "tap", "@playwright/test",
                  "cypress", "karma", "uvu"},
}
_GO = {
    FRAMEWORK: {"github.com/gin-gonic/gin", "github.com/labstack/echo", "github.com/gofiber/fiber",
                "github.com/go-chi/chi", "github.com/gorilla/mux", "google.golang.org/grpc",
                "github.com/beego/beego", "github.com/valyala/fasthttp"},
    DATABASE_DRIVER: {"github.com/lib/pq", "github.com/jackc/pgx", "github.com/go-sql-driver/mysql",
                      "go.mongodb.org/mongo-driver", "github.com/redis/go-redis",
                      "github.com/go-redis/redis", "github.com/mattn/go-sqlite3",
                      "modernc.org/sqlite", "github.com/gocql/gocql",
                      "github.com/ClickHouse/clickhouse-go"},
    TEST_RUNNER: {"github.com/stretchr/testify", "github.com/onsi/ginkgo", "gotest.tools"},
}
_RUST = {
    FRAMEWORK: {"actix-web", "axum", "rocket", "warp", "tide", "poem", "tonic", "leptos",
                "tauri"},
    DATABASE_DRIVER: {"tokio-postgres", "postgres", "mysql", "mysql_async", "redis", "mongodb",
                      "rusqlite", "sqlx", "scylla"},
    TEST_RUNNER: {"rstest", "cucumber"},
}
_MAVEN = {  # groupId:artifactId
    FRAMEWORK: {"org.springframework.boot:spring-boot-starter-parent",
                "org.springframework.boot:spring-boot-starter-web",
                "org.springframework.boot:spring-boot-starter-webflux",
                "io.quarkus:quarkus-rest", "io.quarkus:quarkus-resteasy-reactive",
                "io.micronaut:micronaut-http-server-netty", "io.dropwizard:dropwizard-core",
                "io.javalin:javalin", "io.vertx:vertx-web", "io.grpc:grpc-netty-shaded"},
    DATABASE_DRIVER: {"org.postgresql:postgresql", "com.mysql:mysql-connector-j",
                      "mysql:mysql-connector-java", "org.mariadb.jdbc:mariadb-java-client",
                      "com.oracle.database.jdbc:ojdbc11", "com.oracle.database.jdbc:ojdbc8",
                      "com.microsoft.sqlserver:mssql-jdbc", "org.mongodb:mongodb-driver-sync",
                      "redis.clients:jedis", "io.lettuce:lettuce-core",
                      "org.xerial:sqlite-jdbc", "com.h2database:h2"},
    TEST_RUNNER: {"org.junit.jupiter:junit-jupiter", "org.junit.jupiter:junit-jupiter-api",
                  "junit:junit", "org.testng:testng", "org.spockframework:spock-core"},
}
TABLES = {"python": _PYTHON, "node": _NODE, "go": _GO, "rust": _RUST, "maven": _MAVEN}

_GO_MAJOR = re.compile(r"/v\d+$")


def python_name(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def roles(ecosystem: str, name: str) -> list[str]:
    """The role predicates a dependency called ``name`` has (usually none)."""
    key = {"python": python_name, "go": lambda n: _GO_MAJOR.sub("", n)}.get(
        ecosystem, lambda n: n)(name)
    return [role for role, names in TABLES[ecosystem].items() if key in names]


def dependency_facts(doc: Document, subject: str, ecosystem: str, name: str, requirement: str,
                     start: int, end: int | None = None, group: str = "",
                     quote: str | None = None) -> Iterator[Fact]:
    """``depends_on`` the requirement as written, and the role facts its name has;
    ``quote``: what the lines hold when the name is composed (Maven's group:artifact)."""
    slot = f"{group}:{name}" if group else name
    yield doc.fact(subject, "depends_on", requirement, start, end, slot=slot,
                   document_type=DEPENDENCIES, quote=quote or name)
    for role in roles(ecosystem, name):
        yield doc.fact(subject, role, name, start, end, slot=slot, document_type=DEPENDENCIES,
                       quote=quote or name)
