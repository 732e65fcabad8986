"""rocketrio's RocketMQ 4.x client: async-first on anyio (Trio or asyncio), with a blocking facade in
:mod:`client.sync`.

The public names are re-exported here::

    from client import Producer, PushConsumer, LitePullConsumer, Admin, Message, ConsumeConcurrentlyStatus
    from client import TransactionProducer, LocalTransactionState
"""

from client.admin import Admin
from client.config import ClientConfig
from client.consumer.allocate import (
    AllocateMachineRoomNearby,
    AllocateMessageQueueAveragely,
    AllocateMessageQueueAveragelyByCircle,
    AllocateMessageQueueByConfig,
    AllocateMessageQueueByMachineRoom,
    AllocateMessageQueueConsistentHash,
    AllocateMessageQueueStrategy,
    MachineRoomResolver,
    allocate_average,
    allocate_average_by_circle,
)
from client.consumer.listener import ConsumeConcurrentlyStatus, ConsumeOrderlyStatus
from client.consumer.lite_pull import LitePullConsumer
from client.consumer.push import PushConsumer
from client.errors import (
    ClientStateError,
    MessageValidationError,
    MQBrokerError,
    MQClientError,
    QueueSelectionError,
    SendFailedError,
    TopicRouteNotFoundError,
)
from client.instance import MQClientInstance
from client.message import Message, MessageExt, SendResult, SendStatus
from client.producer import Producer
from client.selector import select_by_hash, select_by_random
from client.transaction import LocalTransactionState, TransactionProducer, TransactionSendResult
from remoting.codec.bodies import ConsumeFromWhere, MessageModel, MessageQueue

__all__ = [
    "Admin",
    "AllocateMachineRoomNearby",
    "AllocateMessageQueueAveragely",
    "AllocateMessageQueueAveragelyByCircle",
    "AllocateMessageQueueByConfig",
    "AllocateMessageQueueByMachineRoom",
    "AllocateMessageQueueConsistentHash",
    "AllocateMessageQueueStrategy",
    "ClientConfig",
    "ClientStateError",
    "ConsumeConcurrentlyStatus",
    "ConsumeFromWhere",
    "ConsumeOrderlyStatus",
    "LitePullConsumer",
    "LocalTransactionState",
    "MQBrokerError",
    "MQClientError",
    "MQClientInstance",
    "MachineRoomResolver",
    "Message",
    "MessageExt",
    "MessageModel",
    "MessageQueue",
    "MessageValidationError",
    "Producer",
    "PushConsumer",
    "QueueSelectionError",
    "SendFailedError",
    "SendResult",
    "SendStatus",
    "TopicRouteNotFoundError",
    "TransactionProducer",
    "TransactionSendResult",
    "allocate_average",
    "allocate_average_by_circle",
    "select_by_hash",
    "select_by_random",
]
