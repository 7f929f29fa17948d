# MLflow tracking server with the Postgres driver (the official image lacks psycopg2).
# Built by the `mlflow` service of docker-compose.yml (context: docker/).
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

# Keep in step with the mlflow version the project resolves (pyproject: mlflow>=3,<4).
ARG MLFLOW_VERSION=3.17.2
RUN pip install "mlflow==${MLFLOW_VERSION}" psycopg2-binary

RUN mkdir -p /mlartifacts
EXPOSE 5000
CMD ["mlflow", "server", "--host", "0.0.0.0", "--port", "5000", "--workers", "1"]
