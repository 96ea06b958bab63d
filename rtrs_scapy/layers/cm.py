"""IB Communication Management as used by RDMA CM: the MAD common header, CM
REQ/REP/REJ/RTU/DREQ/DREP/MRA and the 36-byte RDMA-CM IP header
(docs/PROTOCOL.md#connection-management).

Field names follow the IBTA CM attribute layouts (as Wireshark decodes them),
in snake case.  Each CM message's private data is its payload, padded to the
fixed private-data size on build; upper layers register guessers to decode it
(RTRS conn_req in REQ, conn_rsp in REP and REJ).
"""

from scapy.fields import (
    BitEnumField, BitField, ByteEnumField, ByteField, IP6Field, ShortEnumField, ShortField,
    StrFixedLenField, XBitField, XByteField, XIntField, XLongField, XShortField,
)
from scapy.packet import bind_bottom_up, bind_top_down

from .base import GuessingPacket, fixed_size
from .ib import GSI_QPN, UD, Operation, register_ib_payload

MGMT_CLASS_CM = 0x07
CM_CLASS_VERSION = 2
MAD_METHOD_SEND = 0x03
MAD_SIZE = 256

# CM attribute IDs: the MAD AttributeID of each CM message (IBTA 12.6, table 97)
CM_ATTR_CLASS_PORT_INFO = 0x0001
CM_ATTR_REQ = 0x0010
CM_ATTR_MRA = 0x0011
CM_ATTR_REJ = 0x0012
CM_ATTR_REP = 0x0013
CM_ATTR_RTU = 0x0014
CM_ATTR_DREQ = 0x0015
CM_ATTR_DREP = 0x0016
CM_ATTR_SIDR_REQ = 0x0017
CM_ATTR_SIDR_REP = 0x0018
CM_ATTR_LAP = 0x0019
CM_ATTR_APR = 0x001A
cm_attribute_ids = {
    CM_ATTR_CLASS_PORT_INFO: "ClassPortInfo", CM_ATTR_REQ: "ConnectRequest",
    CM_ATTR_MRA: "MsgRcptAck", CM_ATTR_REJ: "ConnectReject", CM_ATTR_REP: "ConnectReply",
    CM_ATTR_RTU: "ReadyToUse", CM_ATTR_DREQ: "DisconnectRequest",
    CM_ATTR_DREP: "DisconnectReply", CM_ATTR_SIDR_REQ: "ServiceIDResReq",
    CM_ATTR_SIDR_REP: "ServiceIDResReqResp", CM_ATTR_LAP: "LoadAlternatePath",
    CM_ATTR_APR: "AlternatePathResponse",
}
mgmt_classes = {0x01: "SUBN_LID_ROUTED", 0x03: "SUBN_ADM", 0x04: "PERF",
                 0x07: "CM", 0x81: "SUBN_DIRECTED_ROUTE"}
# REJ reasons: the IBTA names, numbered as enum ib_cm_rej_reason (include/rdma/ib_cm.h),
# docs/PROTOCOL.md#cm-rep-rej-rtu-dreq-drep-and-mra
cm_rej_reasons = {
    1: "No QP available", 2: "No EEC available", 3: "No resources available",
    4: "Timeout", 5: "Unsupported request", 6: "Invalid Communication ID",
    7: "Invalid Communication Instance", 8: "Invalid Service ID",
    9: "Invalid Transport Service Type", 10: "Stale Connection",
    11: "RDC does not exist", 12: "Primary Remote Port GID rejected",
    13: "Primary Remote Port LID rejected", 14: "Invalid Primary SL",
    15: "Invalid Primary Traffic Class", 16: "Invalid Primary Hop Limit",
    17: "Invalid Primary Packet Rate", 18: "Alternate Remote Port GID rejected",
    19: "Alternate Remote Port LID rejected", 20: "Invalid Alternate SL",
    21: "Invalid Alternate Traffic Class", 22: "Invalid Alternate Hop Limit",
    23: "Invalid Alternate Packet Rate", 24: "Port and CM Redirection",
    25: "Port Redirection", 26: "Invalid Path MTU", 27: "Insufficient Responder Resources",
    28: "Consumer Reject", 29: "RNR Retry Count Reject",
    30: "Duplicate Local Communication ID", 31: "Invalid Class Version",
    32: "Invalid Flow Label", 33: "Invalid Alternate Flow Label",
    35: "Vendor Option Not Supported",
}
msg_kinds = {0: "REQ", 1: "REP", 2: "other"}
mraed_kinds = {0: "REQ", 1: "REP", 2: "LAP"}
cma_ip_versions = {4: "IPv4", 6: "IPv6"}
# Path MTU codes of the REQ (IBTA enum: 1 = 256 bytes .. 5 = 4096 bytes)
PATH_MTU_BYTES = {1: 256, 2: 512, 3: 1024, 4: 2048, 5: 4096}
path_mtus = {code: str(size) for code, size in PATH_MTU_BYTES.items()}
transport_service_types = {0: "RC", 1: "UC", 2: "RD", 3: "XRC"}

# RDMA CM service IDs: (port space << 16) + port
# (docs/PROTOCOL.md#rdma-cm-service-id-and-ip-header)
RDMA_PS_TCP = 0x0106
RDMA_PS_UDP = 0x0111
RDMA_PS_IPOIB = 0x0002
RDMA_PS_IB = 0x013F
IP_SERVICE_ID_PREFIX = 0x0000000001000000  # 0x0000000001PPxxxx (Wireshark's prefix)
AF_IB_SERVICE_ID = RDMA_PS_IB << 16


def service_id(port, port_space=RDMA_PS_TCP):
    return (port_space << 16) | port


def is_ip_service_id(sid):
    """True for RDMA CM IP port spaces (a CMA header precedes the REQ private data)."""
    return sid >> 24 == IP_SERVICE_ID_PREFIX >> 24 and (sid >> 16) & 0xFF != RDMA_PS_IB & 0xFF


class MAD(GuessingPacket):
    """MAD common header, 24 bytes; the attribute follows (docs/PROTOCOL.md#cm-mads)."""
    name = "MAD"
    fields_desc = [
        ByteField("base_version", 1),
        ByteEnumField("mgmt_class", MGMT_CLASS_CM, mgmt_classes),
        ByteField("class_version", CM_CLASS_VERSION),
        BitField("r", 0, 1),
        BitField("method", MAD_METHOD_SEND, 7),
        XShortField("status", 0),
        XShortField("class_specific", 0),
        XLongField("transaction_id", 0),
        ShortEnumField("attribute_id", 0, cm_attribute_ids),
        XShortField("reserved", 0),
        XIntField("attribute_modifier", 0),
    ]

    def mysummary(self):
        if self.mgmt_class == MGMT_CLASS_CM:
            return self.sprintf("MAD CM %attribute_id% tid %transaction_id%")
        return self.sprintf("MAD %mgmt_class%")


class _CMMessage(GuessingPacket):
    """A CM message: fixed fields, then ``private_data_size`` bytes of private data."""
    private_data_size = 0

    def post_build(self, p, pay):
        return p + pay.ljust(self.private_data_size, b"\0")

    def extract_padding(self, s):
        return s[:self.private_data_size], s[self.private_data_size:]


def _path_fields(prefix):
    """Primary/alternate path information of a REQ, 44 bytes at CM offset 52 and 96
    (docs/PROTOCOL.md#cm-req)."""
    return [
        XShortField(prefix + "_local_port_lid", 0),
        XShortField(prefix + "_remote_port_lid", 0),
        IP6Field(prefix + "_local_port_gid", "::"),
        IP6Field(prefix + "_remote_port_gid", "::"),
        XBitField(prefix + "_flow_label", 0, 20),
        BitField(prefix + "_reserved1", 0, 6),
        BitField(prefix + "_packet_rate", 0, 6),
        ByteField(prefix + "_traffic_class", 0),
        ByteField(prefix + "_hop_limit", 0),
        BitField(prefix + "_sl", 0, 4),
        BitField(prefix + "_subnet_local", 0, 1),
        BitField(prefix + "_reserved2", 0, 3),
        BitField(prefix + "_local_ack_timeout", 0, 5),
        BitField(prefix + "_reserved3", 0, 3),
    ]


class CMReq(_CMMessage):
    """ConnectRequest; private data: CMA header + conn_req
    (docs/PROTOCOL.md#cm-req)."""
    name = "CM REQ"
    private_data_size = 92
    fields_desc = [
        XIntField("local_comm_id", 0),
        ByteField("reserved1", 0),
        XBitField("vendor_id", 0, 24),
        XLongField("service_id", 0),
        XLongField("local_ca_guid", 0),
        XIntField("reserved2", 0),
        XIntField("local_qkey", 0),
        XBitField("local_qpn", 0, 24),
        ByteField("responder_resources", 0),
        XBitField("local_eecn", 0, 24),
        ByteField("initiator_depth", 0),
        XBitField("remote_eecn", 0, 24),
        BitField("remote_cm_response_timeout", 20, 5),
        BitEnumField("transport_service_type", 0, 2, transport_service_types),
        BitField("end_to_end_flow_control", 0, 1),
        BitField("starting_psn", 0, 24),
        BitField("local_cm_response_timeout", 20, 5),
        BitField("retry_count", 7, 3),
        XShortField("partition_key", 0xFFFF),
        BitEnumField("path_mtu", 3, 4, path_mtus),
        BitField("rdc_exists", 0, 1),
        BitField("rnr_retry_count", 7, 3),
        BitField("max_cm_retries", 15, 4),
        BitField("srq", 0, 1),
        BitField("extended_transport_type", 0, 3),
    ] + _path_fields("primary") + _path_fields("alternate")

    def mysummary(self):
        return self.sprintf("CM REQ comm_id %local_comm_id% qpn %local_qpn% "
                            "service_id %service_id%")


class CMRep(_CMMessage):
    """ConnectReply; private data: conn_rsp
    (docs/PROTOCOL.md#cm-rep-rej-rtu-dreq-drep-and-mra)."""
    name = "CM REP"
    private_data_size = 196
    fields_desc = [
        XIntField("local_comm_id", 0),
        XIntField("remote_comm_id", 0),
        XIntField("local_qkey", 0),
        XBitField("local_qpn", 0, 24),
        XByteField("vendor_id_high", 0),
        XBitField("local_eecn", 0, 24),
        XByteField("vendor_id_mid", 0),
        BitField("starting_psn", 0, 24),
        XByteField("vendor_id_low", 0),
        ByteField("responder_resources", 0),
        ByteField("initiator_depth", 0),
        BitField("target_ack_delay", 0, 5),
        BitField("failover_accepted", 0, 2),
        BitField("end_to_end_flow_control", 0, 1),
        BitField("rnr_retry_count", 7, 3),
        BitField("srq", 0, 1),
        BitField("reserved", 0, 4),
        XLongField("local_ca_guid", 0),
    ]

    def mysummary(self):
        return self.sprintf("CM REP comm_id %local_comm_id% qpn %local_qpn%")


class CMRej(_CMMessage):
    """ConnectReject; private data: conn_rsp with the errno
    (docs/PROTOCOL.md#cm-rep-rej-rtu-dreq-drep-and-mra)."""
    name = "CM REJ"
    private_data_size = 148
    fields_desc = [
        XIntField("local_comm_id", 0),
        XIntField("remote_comm_id", 0),
        BitEnumField("message_rejected", 0, 2, msg_kinds),
        BitField("reserved1", 0, 6),
        BitField("reject_info_length", 0, 7),
        BitField("reserved2", 0, 1),
        ShortEnumField("reason", 28, cm_rej_reasons),
        StrFixedLenField("additional_reject_information", b"\0" * 72, 72),
    ]

    def mysummary(self):
        return self.sprintf("CM REJ comm_id %remote_comm_id% reason %reason%")


class CMRtu(_CMMessage):
    """ReadyToUse, docs/PROTOCOL.md#cm-rep-rej-rtu-dreq-drep-and-mra."""
    name = "CM RTU"
    private_data_size = 224
    fields_desc = [XIntField("local_comm_id", 0), XIntField("remote_comm_id", 0)]


class CMDreq(_CMMessage):
    """DisconnectRequest, docs/PROTOCOL.md#cm-rep-rej-rtu-dreq-drep-and-mra."""
    name = "CM DREQ"
    private_data_size = 220
    fields_desc = [
        XIntField("local_comm_id", 0),
        XIntField("remote_comm_id", 0),
        XBitField("remote_qpn", 0, 24),
        ByteField("reserved", 0),
    ]


class CMDrep(_CMMessage):
    """DisconnectReply, docs/PROTOCOL.md#cm-rep-rej-rtu-dreq-drep-and-mra."""
    name = "CM DREP"
    private_data_size = 224
    fields_desc = [XIntField("local_comm_id", 0), XIntField("remote_comm_id", 0)]


class CMMra(_CMMessage):
    """MsgRcptAck, docs/PROTOCOL.md#cm-rep-rej-rtu-dreq-drep-and-mra."""
    name = "CM MRA"
    private_data_size = 222
    fields_desc = [
        XIntField("local_comm_id", 0),
        XIntField("remote_comm_id", 0),
        BitEnumField("message_mraed", 0, 2, mraed_kinds),
        BitField("reserved1", 0, 6),
        BitField("service_timeout", 0, 5),
        BitField("reserved2", 0, 3),
    ]


class CmaIpHdr(GuessingPacket):
    """RDMA CM header in front of the REQ private data (IP addressing),
    docs/PROTOCOL.md#rdma-cm-service-id-and-ip-header.

    ``port`` is the active side's *source* port; the destination port is in
    the service ID.
    """
    name = "RDMA CM IP header"
    fields_desc = [
        ByteField("cma_version", 0),
        BitEnumField("ip_version", 4, 4, cma_ip_versions),
        BitField("reserved", 0, 4),
        ShortField("port", 0),
        IP6Field("src_addr", "::"),
        IP6Field("dst_addr", "::"),
    ]

    @staticmethod
    def _addr(value, version):
        if version == 4 and value.startswith("::"):
            return value.rsplit(":", 1)[-1] if "." in value else value
        return value

    @property
    def src(self):
        return self._addr(self.src_addr, self.ip_version)

    @property
    def dst(self):
        return self._addr(self.dst_addr, self.ip_version)


CM_MESSAGES = {CM_ATTR_REQ: CMReq, CM_ATTR_MRA: CMMra, CM_ATTR_REJ: CMRej, CM_ATTR_REP: CMRep,
               CM_ATTR_RTU: CMRtu, CM_ATTR_DREQ: CMDreq, CM_ATTR_DREP: CMDrep}
MAD_HDR_SIZE = fixed_size(MAD)

for _attr, _cls in CM_MESSAGES.items():
    bind_bottom_up(MAD, _cls, mgmt_class=MGMT_CLASS_CM, attribute_id=_attr)
    bind_top_down(MAD, _cls, mgmt_class=MGMT_CLASS_CM, attribute_id=_attr)


@CMReq.register_payload_guesser
def _req_private_data(req, payload):
    return CmaIpHdr if is_ip_service_id(req.service_id) else None


@register_ib_payload
def _gsi_mad(bth, payload):
    """CM MADs are UD SENDs to the GSI QP 1 (docs/PROTOCOL.md#cm-mads)."""
    if (bth.opcode == UD | Operation.SEND_ONLY and bth.dqpn == GSI_QPN
            and len(payload) >= MAD_HDR_SIZE):
        return MAD
    return None
