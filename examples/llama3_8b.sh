# Llama 3 8B, as a launch script passes it
torchrun --nproc_per_node 8 pretrain_gpt.py \
    --num-layers 32 --hidden-size 4096 --ffn-hidden-size 14336 \
    --num-attention-heads 32 --group-query-attention --num-query-groups 8 \
    --seq-length 8192 --max-position-embeddings 8192 \
    --position-embedding-type rope --swiglu --normalization RMSNorm \
    --disable-bias-linear --untie-embeddings-and-output-weights \
    --attention-dropout 0.0 --hidden-dropout 0.0 \
    --tokenizer-type NullTokenizer --vocab-size 128256 --tensor-model-parallel-size 2 --pipeline-model-parallel-size 2 \
    --sequence-parallel --use-distributed-optimizer \
    --micro-batch-size 1 --global-batch-size=128 --lr 3e-4 --bf16  # lr changes no byte
