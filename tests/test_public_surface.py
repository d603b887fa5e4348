"""The public face of ``fevex`` and of every plugin, held against the ``__all__`` of each public
package as it stood before the kernel was reshaped (``public_api_before.json``).

A reshaping moves private code and leaves the public names alone: no name may disappear, and
a name may be added only by listing it in ``ADDED`` with the reason it is public.
"""

from __future__ import annotations

import importlib
import json
import pkgutil
from pathlib import Path

BEFORE: dict[str, list[str]] = json.loads(
    (Path(__file__).with_name("public_api_before.json")).read_text()
)
DISTRIBUTION_ROOTS = [
    "fevex",
    "fevex_deepseek",
    "fevex_mcp",
    "fevex_openai",
    "fevex_openapi",
    "fevex_opentelemetry",
    "fevex_postgres",
    "fevex_sqlite",
]
# Names this reshaping made public, by package.
ADDED: dict[str, set[str]] = {
    # The store-author surface: what a run or memory store outside the core imports.
    "fevex.runtime": {
        # A running tool call's request for a person's input, and the answer resume_run
        # takes (issue 43: MCP elicitation answered by a person).
        "InputAnswer",
        "PendingInput",
        # The record contract (DESIGN §12) that the family and publication kits keep their
        # records in, with the rules every record store applies.
        "MAX_RECORD_CHARS",
        "InMemoryRecordStore",
        "RecordStore",
        "StoredRecord",
        "check_record_key",
        "check_record_swap",
        # The contract's values and optional capabilities, which store plugins implement.
        "RUN_FIELDS_A_COMMIT_CHANGES",
        "NotifyingRunStore",
        "RunTakeover",
        "TakeoverRunStore",
        # list_runs' one listing, and the query a store reads it as (checked once).
        "RunListing",
        "RunQuery",
        # A session snapshot changed by a reservation or a turn, keeping the messages it
        # built, so that a store's turn costs the same on a long session (issue 28).
        "changed_session",
        # The store rules (fevex.runtime.store_rules), with the errors they raise.
        "StoredRun",
        "check_acquirable",
        "check_commit",
        "check_commit_arguments",
        "check_create_arguments",
        "check_event_ids_new",
        "check_event_page",
        "check_expired_run_limit",
        "check_lease",
        "check_new_session",
        "check_renewal",
        "check_revision",
        "check_run_is_new",
        "check_run_page",
        "check_sequence",
        "check_session_id",
        "check_session_reservable",
        "check_session_saveable",
        "claimable_names",
        "cursor_sequence",
        "ended_statuses",
        "ends_run",
        "event_id_taken",
        "invalid_argument",
        "invalid_cursor",
        "is_claimable",
        "is_due",
        "lease_is_live",
        "lease_lost",
        "parent_to_wake",
        "records_cancel_request",
        "run_cancel_requested",
        "run_conflict",
        "run_cursor",
        "run_not_found",
        "session_not_found",
        "store_error",
        # What every store can keep: text, and a memory store's values
        # (fevex.runtime.memory_rules).
        "is_storable",
        "FORMER_DEFAULT_NAMESPACE",
        "check_memory_content",
        "check_memory_id",
        "check_memory_metadata",
        "check_namespace",
    },
    # Tool plugins (MCP, OpenAPI) redact resolved credentials as the core does; the answer
    # ToolContext.complete returns (issue 43: an MCP server's sampling request is a
    # completion an app model gives on the run's behalf); and a tool returns images and
    # files beside its value (issue 43: an MCP server's media arrive as message parts).
    "fevex.tools": {"Completion", "REDACTED", "ToolOutput", "redact_secrets", "secret_spellings"},
    # fevex.cli was a module, so not walked before; as a package it exports what it did.
    "fevex.cli": {"CommandRegistry", "StoreCommands", "load_reference", "main", "work_lanes"},
    # The command registry a plugin's fevex_register_commands hook receives, typed in the hook
    # spec, and the command it adds: plugins import them here, not from the CLI above them;
    # and the callback every plugin's hook implementation receives (Register).
    "fevex.plugins": {"Command", "CommandRegistry", "StoreCommands", "Register"},
    # The one walker of JSON Schema documents and the one digest of JSON values, which the
    # core and the plugins (fevex-openai's strict mode, fevex-openapi's subset, fevex-mcp's
    # pins) share; plugins may import only what a barrel exports.
    "fevex.schemas": {"JsonSchemaVisitor", "Subschema", "SubschemaShapeError", "json_digest"},
    # The reflection kit (DESIGN §12): its definition and run, the report it delivers with
    # its parts, the two sources, and the source port (protocol, scope, page, log reader,
    # the app as a source sees it) an app implements to reflect over a history of its own.
    "fevex.kits.reflection": {
        "Finding",
        "HistoryApp",
        "Limitation",
        "LogReader",
        "Reflection",
        "ReflectionCoverage",
        "ReflectionReport",
        "ReflectionSource",
        "SourcePage",
        "SourceScope",
        "define_reflection",
        "log_source",
        "run_history_source",
    },
    # Durable professional tasks (DESIGN §12): what an app defines a task with, what
    # define_durable_task returns and create_fevex(tasks=) takes, and what a step is given.
    "fevex.kits.tasks": {"DurableTask", "TaskContext", "TaskStep", "define_durable_task"},
    # The record stores of the SQLite and PostgreSQL plugins (DESIGN §12), which
    # create_fevex(record_store=) may be given like their run stores.
    "fevex_sqlite": {"SQLiteRecordStore"},
    "fevex_postgres": {"PostgresRecordStore"},
    # The record-store contract as checks (DESIGN §12), which the SQLite and PostgreSQL
    # plugins and any other record store run on themselves, like check_memory_store; and
    # where an error lets a reporter reach a secret, which adapters' tests ask of their key.
    "fevex.testing": {
        "RecordStoreContractError",
        "RecordStoreFactory",
        "check_record_store",
        "places_holding",
    },
    # The bounded-child-runs kit (DESIGN §12): a workflow's or a team's step runs a group of
    # child runs with run_children, each task a ChildTask.
    "fevex.kits.children": {"ChildTask", "run_children"},
    # Agent families (DESIGN §12): define_agent_family and the family it returns, the
    # family and versions its operations read back, what the app's merge returns, and what
    # the operations use of the app.
    "fevex.kits.family": {
        "AgentFamily",
        "Family",
        "FamilyApp",
        "FamilyMerge",
        "FamilyVersion",
        "define_agent_family",
    },
    # Knowledge publication (DESIGN §12): the definition and what it returns, the documents,
    # sources and required reads an app gives it, the state, candidates and official
    # documents it reads back, the receipt of each write, and the app port it writes through.
    "fevex.kits.publication": {
        "Candidate",
        "KnowledgeDocument",
        "KnowledgePublication",
        "PublicationApp",
        "PublicationReceipt",
        "PublicationState",
        "PublishedDocument",
        "RequiredRead",
        "SourceReference",
        "define_knowledge_publication",
    },
    # The one SSRF guard (issue 43), moved from fevex-openapi so that fevex-mcp's OAuth flow
    # need not depend on another plugin: the host policy and its address tables (standard
    # library only), and the httpx2 transport that checks resolved addresses, read lazily.
    "fevex.net": {
        "IPV4_SPECIAL_PURPOSE",
        "IPV6_SPECIAL_PURPOSE",
        "OTHER_RANGES",
        "AddressRange",
        "GuardedNetworkBackend",
        "GuardedTransport",
        "HostPolicy",
        "IPAddress",
        "address_refusal",
        "host_refusal",
        "is_public_address",
        "literal_address",
    },
    # A running tool call's request for a person's input, and its answer (issue 43).
    "fevex": {"InputAnswer", "PendingInput"},
    # A running tool call's progress, as the stream layer of project_run shows it (issue 43:
    # MCP progress notifications, and ToolContext.report_progress, become tool.progress).
    "fevex.events": {"ToolProgress"},
    # OAuth 2.1 for MCP servers over Streamable HTTP (issue 43): the options a provider
    # takes as oauth=, the redirect a CLI can use, and the token stores an app gives it.
    "fevex_mcp": {
        # Elicitation (issue 43): what a handler receives and returns, and the default
        # time an answer may take.
        "DEFAULT_ELICITATION_TIMEOUT",
        "ElicitationAction",
        "ElicitationHandler",
        "ElicitationRequest",
        "ElicitationResponse",
        "FileTokenStore",
        "InMemoryTokenStore",
        "MCPOAuth",
        # The client capabilities a provider offers its server when configured (issue 43):
        # the sampling options (sampling=) and one root (roots=).
        "MCPRoot",
        "MCPSampling",
        "OAuthRedirect",
        "TokenEndpointAuthMethod",
        "TokenStore",
        "terminal_redirect",
    },
}


def _public_packages() -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for root in DISTRIBUTION_ROOTS:
        package = importlib.import_module(root)
        found[root] = list(package.__all__)
        for info in pkgutil.walk_packages(package.__path__, f"{root}."):
            if not info.ispkg or any(part.startswith("_") for part in info.name.split(".")):
                continue
            module = importlib.import_module(info.name)
            if hasattr(module, "__all__"):
                found[info.name] = list(module.__all__)
    return found


def test_no_public_name_disappeared() -> None:
    now = _public_packages()
    missing = {
        package: sorted(set(names) - set(now.get(package, [])))
        for package, names in BEFORE.items()
        if set(names) - set(now.get(package, []))
    }
    assert missing == {}


def test_every_added_name_is_declared() -> None:
    now = _public_packages()
    added = {
        package: set(names) - set(BEFORE.get(package, []))
        for package, names in now.items()
        if set(names) - set(BEFORE.get(package, []))
    }
    assert added == ADDED


def test_every_exported_name_resolves() -> None:
    for package, names in _public_packages().items():
        module = importlib.import_module(package)
        unresolved = [name for name in names if not hasattr(module, name)]
        assert unresolved == [], package
