from fevex.observability.in_memory import InMemoryTraceExporter
from fevex.testing.cassette import (
    ModelRecorder,
    ModelReplay,
    model_input_json,
    record_model,
    replay_model,
)
from fevex.testing.fake_model import FakeModel, FakeResponse
from fevex.testing.function_model import FunctionModel, ModelFunction
from fevex.testing.memory_store_contract import MemoryStoreContractError, check_memory_store
from fevex.testing.model_contract import check_model_gateway, default_contract_inputs
from fevex.testing.record_store_contract import (
    RecordStoreContractError,
    RecordStoreFactory,
    check_record_store,
)
from fevex.testing.run_store_contract import (
    RUN_STORE_CHECKS,
    ManualClock,
    RunStoreCheck,
    RunStoreContractError,
    RunStoreFactory,
    RunStoreReport,
    check_run_store,
)
from fevex.testing.secrets import places_holding
from fevex.testing.trace_exporter_contract import check_trace_exporter, contract_spans

__all__ = [
    "RUN_STORE_CHECKS",
    "FakeModel",
    "FakeResponse",
    "FunctionModel",
    "InMemoryTraceExporter",
    "ManualClock",
    "MemoryStoreContractError",
    "ModelFunction",
    "ModelRecorder",
    "ModelReplay",
    "RecordStoreContractError",
    "RecordStoreFactory",
    "RunStoreCheck",
    "RunStoreContractError",
    "RunStoreFactory",
    "RunStoreReport",
    "check_memory_store",
    "check_model_gateway",
    "check_record_store",
    "check_run_store",
    "check_trace_exporter",
    "contract_spans",
    "default_contract_inputs",
    "model_input_json",
    "places_holding",
    "record_model",
    "replay_model",
]
