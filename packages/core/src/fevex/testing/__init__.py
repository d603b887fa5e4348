from fevex.testing.fake_model import FakeModel, FakeResponse
from fevex.testing.model_contract import check_model_gateway, default_contract_inputs

__all__ = ["FakeModel", "FakeResponse", "check_model_gateway", "default_contract_inputs"]
