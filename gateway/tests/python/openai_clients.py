"""Embeds texts with an OpenAI embeddings client nobody here wrote, unmodified,
pointed at the gateway; run by test_openai_clients.py with the Python of
`.venv-embed-clients` (scripts/setup.sh test):

    .venv-embed-clients/bin/python openai_clients.py CLIENT BASE_URL MODEL < texts.json

CLIENT is `langchain` (langchain-openai's OpenAIEmbeddings) or `llamaindex`
(llama-index-embeddings-openai's OpenAIEmbedding). Prints
`{"documents": [[...], ...], "query": [...]}`: the texts embedded as
documents, and the first one as a query."""

import json
import sys


def langchain(base_url, model, texts):
    from langchain_openai import OpenAIEmbeddings

    # check_embedding_ctx_length=False: by default LangChain splits texts with
    # tiktoken (OpenAI's BPE, downloaded on first use) and sends token ids;
    # for models that are not OpenAI's it is told to send the texts.
    client = OpenAIEmbeddings(model=model, base_url=base_url, api_key="unused",
                              check_embedding_ctx_length=False, max_retries=0)
    return client.embed_documents(texts), client.embed_query(texts[0])


def llamaindex(base_url, model, texts):
    from llama_index.embeddings.openai import OpenAIEmbedding

    client = OpenAIEmbedding(model_name=model, api_base=base_url, api_key="unused", max_retries=0)
    return client.get_text_embedding_batch(texts), client.get_query_embedding(texts[0])


def main():
    client, base_url, model = sys.argv[1:4]
    texts = json.load(sys.stdin)
    documents, query = {"langchain": langchain, "llamaindex": llamaindex}[client](base_url, model, texts)
    json.dump({"documents": documents, "query": query}, sys.stdout)


if __name__ == "__main__":
    main()
