"""The scenario in LangGraph: the standard model/tools graph over a small fake chat model.

The graph is built by hand from ``StateGraph``, ``ToolNode`` and ``tools_condition``, the
pattern LangGraph documents; ``create_react_agent`` is deprecated in LangGraph 1.x in favour
of ``langchain.agents``, a different package. LangChain's bundled fake chat models replay a
fixed list and cannot bind tools, so the model here is a small ``BaseChatModel`` subclass.

Run with ``python -m benchmarks.frameworks.with_langgraph [--out FILE]`` from the repository root.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import RunnableLambda
from langchain_core.tools import BaseTool, StructuredTool
from langchain_core.utils.function_calling import convert_to_openai_tool
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.prebuilt import ToolNode, tools_condition
from pydantic import BaseModel

from benchmarks import measure


class AccountQuery(BaseModel):
    account_id: int


class Account(BaseModel):
    id: int
    status: str


def get_account(query: AccountQuery) -> Account:
    return Account(id=query.account_id, status="active")


async def get_account_async(query: AccountQuery) -> Account:
    return get_account(query)


class AccountsChatModel(BaseChatModel):
    """Answers once the conversation holds the tool's result; until then, asks for the tool."""

    @property
    def _llm_type(self) -> str:
        return "accounts-fake"

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
        last = messages[-1]
        if isinstance(last, ToolMessage):
            message = AIMessage(content=measure.reply_to(last.content))
        else:
            call = {
                "id": "call-1",
                "name": measure.TOOL_NAME,
                "args": {"query": {"account_id": measure.ACCOUNT_ID}},
            }
            message = AIMessage(content="", tool_calls=[call])
        return ChatResult(generations=[ChatGeneration(message=message)])

    async def _agenerate(
        self, messages: list[BaseMessage], *args: Any, **kwargs: Any
    ) -> ChatResult:
        # The default runs ``_generate`` in a thread pool, which no real async client does.
        return self._generate(messages)

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Any:
        return self.bind(tools=[convert_to_openai_tool(tool) for tool in tools], **kwargs)


model = AccountsChatModel()
# A LangChain tool with only a coroutine cannot run under the blocking ``invoke``; it gets both.
account_tool: BaseTool = StructuredTool.from_function(
    func=get_account,
    coroutine=get_account_async,
    name=measure.TOOL_NAME,
    description=measure.TOOL_DESCRIPTION,
)


def define_agent(index: int) -> CompiledStateGraph[Any, Any, Any, Any]:
    bound = model.bind_tools([account_tool])
    prompt = {"role": "system", "content": measure.INSTRUCTIONS}

    def call_model(state: MessagesState) -> dict[str, Any]:
        return {"messages": [bound.invoke([prompt, *state["messages"]])]}

    async def call_model_async(state: MessagesState) -> dict[str, Any]:
        return {"messages": [await bound.ainvoke([prompt, *state["messages"]])]}

    graph = StateGraph(MessagesState)
    graph.add_node("model", RunnableLambda(call_model, afunc=call_model_async))
    graph.add_node("tools", ToolNode([account_tool]))
    graph.add_edge(START, "model")
    graph.add_conditional_edges("model", tools_condition)
    graph.add_edge("tools", "model")
    return graph.compile(name=f"support-{index}")


agent = define_agent(0)
request = {"messages": [{"role": "user", "content": measure.QUESTION}]}


def run_sync() -> object:
    return agent.invoke(request)["messages"][-1].content


async def run_async() -> object:
    return (await agent.ainvoke(request))["messages"][-1].content


if __name__ == "__main__":
    measure.report(
        measure.Scenario(
            framework="langgraph",
            distribution="langgraph",
            import_statement="import langgraph.graph, langgraph.prebuilt",
            tool_kind="sync + async, one tool",
            run_sync=run_sync,
            run_async=run_async,
            define_agent=define_agent,
        )
    )
