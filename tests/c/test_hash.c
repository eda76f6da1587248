/*
 * test_hash.c - known-answer tests for the functions of chash_hash.h.
 *
 * Two kinds of vectors:
 *   - published ones (RFC 1321 appendix A.5, FIPS 180 examples, the CRC-32
 *     check value, FNV-1a and the other families' well-known values),
 *     written out below by hand;
 *   - oracle ones: prefixes of one deterministic byte pattern hashed by the
 *     Python oracles, between the GENERATED VECTORS markers, rewritten by
 *     tests/c/hash_vectors_gen.py.
 * Each result is also recomputed from every misaligned copy of the input,
 * which must not change it.
 *
 * Prints one line per failure and ends with "N passed, M failed"; the exit
 * status is non-zero when anything failed.
 */
#include "chash_hash.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct vec32 {
    size_t len;
    uint32_t seed;
    uint32_t want;
};

struct vec64 {
    size_t len;
    uint64_t seed;
    uint64_t want;
};

struct vecdig {
    size_t len;
    const char *hex;
};

struct strdig {
    const char *msg;
    const char *hex;
};

static unsigned long g_passed;
static unsigned long g_failed;

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))
#define PATTERN_MAX 10000

/* BEGIN GENERATED VECTORS (tests/c/hash_vectors_gen.py) */
static const struct vecdig md5_vectors[] = {
    {0, "d41d8cd98f00b204e9800998ecf8427e"},
    {1, "93b885adfe0da089cdf634904fd59f71"},
    {2, "177d67372486d549ef02b6b661319b23"},
    {3, "a67ea6915931db34dea950eb299205b8"},
    {4, "e119c1857693f594c222623dfdd0d4a1"},
    {5, "41e1fb4692bdfcb83b4a5e0d49b7c96d"},
    {6, "6644df4e4f6fe21a64890a8ba4e9983a"},
    {7, "0fc15182c37a90ae338cc534e4b20783"},
    {8, "0b7bbfd022923cd3cc8b3b60fc8fabcb"},
    {9, "5416cf6e59eaf98237307f4bf072d146"},
    {10, "3247dc64ca23e8f68b8a684aa772b905"},
    {11, "a21e41a0b6d0561116881c1cc0a7e55a"},
    {12, "61741f8f6905a13c3567152461ebb23d"},
    {13, "3b689f7d50a7dd9b907478a57eaba2cc"},
    {14, "11ca751b40f687019248af6c9f1080fa"},
    {15, "6d254d257f3313998a4b369a24afdcee"},
    {16, "a9644a8d75de8f96e3a298db40ce7cfa"},
    {17, "1524207c35f2e3e315cd0cb8d608cbfc"},
    {18, "05c0ef3956d0f1eced12985fca8d20ae"},
    {19, "8f7fa4c8b53e57a742cf0c43019a18c3"},
    {20, "10add43c5a7b5d040618bcfb103b70ad"},
    {21, "b623188fc9180fc705cc822f9347f15a"},
    {22, "851483a1fc9887eebaca493e73bc6399"},
    {23, "523d9f4075c9bd029e72eeb1abbc3ad9"},
    {24, "16c8f3b395f9761939f08bdd8b107cd1"},
    {25, "1868379c7375b9f697fe7426aa560632"},
    {26, "ee4afd36cdfebba36dd0b481e3075635"},
    {27, "4048c853997f289388f62f935ba54e6b"},
    {28, "7610a017df3ea1d3a90049826a491d6e"},
    {29, "3f7abf206850da4fbc280106d6b948d8"},
    {30, "32e7d7309ed2cba46f7853e8b8c44a89"},
    {31, "762dfcad098ccac57d93fe74c6fb8536"},
    {32, "c87f85dfaddb493c4f3aecff53132455"},
    {33, "655a233f021502b59f0664beb51ed878"},
    {47, "45ddb058c698b131a157e5a784b532e5"},
    {48, "0a03b3dede882af5b724d4cae16a2fed"},
    {55, "1eec39e439a0686e0f16143c93e65544"},
    {56, "99d69c39ec90af2fb1496b6e9c6c764d"},
    {57, "e2268186be6f4e7349b13e79170bfa06"},
    {63, "6bb048b09bcadbcdfd181977323cdfd0"},
    {64, "e2ea14ec96ad97249814fe4e07e09782"},
    {65, "6eefe2eaf8f76d19fb53cbf452e5a331"},
    {95, "6820e9ee5cf210bf84ef3e753d458750"},
    {96, "b59d1f78063c1b31e5406f234921631a"},
    {97, "089385761b1ed794bb3fc944b0b31a8b"},
    {100, "a95a89500f9cd3c603a3442a555fc5e4"},
    {119, "34ec2dd3b6fce7edb56cd76666f819bf"},
    {120, "06365e9cd131eec736e29727ab0608dd"},
    {127, "cb5991182d127f0459ee9ea350d938f8"},
    {128, "13d609089cc8e2e7bdf3168efee8ef0a"},
    {129, "3b0641403eaf28fce93d313cea189879"},
    {130, "2aa968586ea5ba0deda2aa8cc68b5ec3"},
    {143, "8f0db6fdfcadea9dd3d2375bd91980c0"},
    {144, "65ae216570b9ab9394c1053eb478e37b"},
    {200, "061cc87a8611dca24357b441580761a9"},
    {239, "3b063900deec41a809242cbdf2447af3"},
    {240, "8cf70bfa2886f3005d86c26cd8c557b8"},
    {241, "4613b6ec5b1477ceef4eb3f5a475658f"},
    {242, "12e124da0d28d82a220207a29d064a0a"},
    {255, "6ccf8b3f831dded02fb46f3acebab424"},
    {256, "e7b9f7200a97b027c56f5c7a0d2be557"},
    {257, "37198fb28e4d742b075437e3ba36fd1d"},
    {300, "771b03613f1973ceb192936d2fb3766b"},
    {511, "e97f3b9f54e45c54488c3f4db4e6b2aa"},
    {512, "836ae00665213b65411526898146fa07"},
    {513, "56bfea12bc511c6ed17c879d24dbf926"},
    {1000, "d2171eede9db55edabb73b9e95e8c0bb"},
    {1023, "0990f5b683b685e9222df27b14a85d48"},
    {1024, "720a169c0e353134995bb8936de7bce1"},
    {1025, "ee59fedf8d526e501055e7f11789e190"},
    {1087, "e8843ed27aa5e572af1a6da10fbd108f"},
    {1088, "1795f8c662a29ff79a28832e1f8d3e2b"},
    {1089, "4c1aea67c0b292599e9b060786abf155"},
    {2047, "5247b5208017e7f4cf19897b614c7336"},
    {2048, "3405d77b7fb9195aac749f85cb2fbe2f"},
    {2049, "d1c75994bc992809140da4a9782a9ac3"},
    {3000, "cd193440fc7eadceb31e9042aa15c691"},
    {4096, "2b6e9f327f32713bff9d289ac0017436"},
    {5000, "345e04df59f6e2e50de410f5fb71a57e"},
    {8191, "c04d05bd5758c5a699535c8417dd05ff"},
    {10000, "314dd3f43f14d74757f9da9344a35317"},
};

static const struct vecdig sha1_vectors[] = {
    {0, "da39a3ee5e6b4b0d3255bfef95601890afd80709"},
    {1, "5ba93c9db0cff93f52b521d7420e43f6eda2784f"},
    {2, "d2f7c10caa261421bd30a00e736a603713e3097f"},
    {3, "9b9701ce48ea72e1a3f9d9ab77cd635e328d627c"},
    {4, "b2799b6030427bf5f9869c12fa102c7a0b23b535"},
    {5, "ce4f458d5b4b36bfa14e0d5d836d2a78826456c6"},
    {6, "6001a56081905db9f9f10123aadbb91623125c34"},
    {7, "3c47cbbcb02afda400d8e60dfa1b600b33f95c89"},
    {8, "2b624914cc76d192756a6d3d84bdb1c95e3d73f8"},
    {9, "e72df34c7c488e8f70ed2a4d3297a1928977177f"},
    {10, "0be5c5206eab89c528d76e714a18149f23f98763"},
    {11, "cc2a686fc21407fa7d0261dfa6890d44694e26ae"},
    {12, "9a3db44eca1a739f6db2e7dd032dedd9a9c96fa3"},
    {13, "e953c9227fc3b70485a68efcb979e521ecaecc64"},
    {14, "095c51dde4b110e6cfd1043ad75e01b330222b21"},
    {15, "f502c6254f9c9571943de04fee88ea781813574d"},
    {16, "4930407a82e2533480acc1c2350b51ee04b53a34"},
    {17, "9c1f1a7728cdf2aaf07a2af8975280dc88295dbd"},
    {18, "e0b555ae9f350b953dcf3539742dcf78aa230e54"},
    {19, "06bffec797b0c3edf09dbe0294307f484d659dbf"},
    {20, "262737494519a22119e5acb6c28557f4755da683"},
    {21, "2f416219637a51957d766338feed9773e1c5d4f8"},
    {22, "59d9803da7da8da52ec233286e3104e8912b0cef"},
    {23, "d4304e69edd412198689539e47cee9e48eb6c4b0"},
    {24, "77d8b221fd42ca45ae9f9af5733b9e6cdae21410"},
    {25, "ef025b9436a7cbdd1d4e0f410c3a4b9820d66976"},
    {26, "3749fd60a6b3a70bdc93b21e84c8d7d43c26a014"},
    {27, "9974b3005b51b19bd5959671093438d88d6cbffd"},
    {28, "eb92d893b7a9023773fbf28f5b2f33f508cdf9af"},
    {29, "608d6641584be16f4b260ea66ba0ba1a053468e0"},
    {30, "f7d49d6f4546f0e26d6b7c5354a40e2a056a0f01"},
    {31, "dd5665cd5f03646e885a3f10dd1f4fb24d7534ab"},
    {32, "201479ba3f44d467cc00fe76abc013955c14dfee"},
    {33, "b4003bc494636a12cccdafac63febc61d2c99a6d"},
    {47, "c5d0c81a99ab66024a9123af0e22e0a3f6434832"},
    {48, "de073673bce9d2ff3f6bbb5837b40c63a6eb0c46"},
    {55, "e7e036d462c840b6d8d00a5a056200c48e92b308"},
    {56, "ba20bee37bc324bd95849d903be9173f49f8915b"},
    {57, "c704042ae19e5d7ff94b723b6141cc5505938738"},
    {63, "a99c0a984b1c4837d91731c8777b091e85ff104d"},
    {64, "2dc6bbd1960538a79c4f4e55d9e1c0aa91c5fa0d"},
    {65, "a67dc545e2f6e8ac566519cffeadf2904064db15"},
    {95, "be45228332b59dcbbecf48b4eb664325a6a5c377"},
    {96, "d16eef42c31b0dcc5dd69bfac93340f10f45c780"},
    {97, "778d3cbe449e0db601f8f5b8d2910c891e02bf3c"},
    {100, "a00ac8d00a30204a5b7cecb109de363e663fc50a"},
    {119, "4978ef272e1dbb722b4d168dfff76e4437f834ad"},
    {120, "da1294e323c8b3cd697be9b4cf42d08047b2559a"},
    {127, "d31a56dab47090800742b17bc277d775652c7a44"},
    {128, "c83672c79a39719e517f410584e87c520cc38dcb"},
    {129, "0138a47cb9e968168c11170855fcdfe4fe15da7f"},
    {130, "7129e0d3ae9cf8b0b2cb81758b26b619d30864da"},
    {143, "bd623537f6705d7e82d06fbff9728e1d871a38e9"},
    {144, "4050cc6beddff40d536608a88ad2aadd59bf93ac"},
    {200, "97f9545c4b45105cb108ebf0a66e0ea02871d89c"},
    {239, "ce86c7ac760e25502e1719fb93ae2474f984932e"},
    {240, "8200fc513e8abb4a36fd407a6b0ebf6b8b7c1c6e"},
    {241, "f662373216c3bece17b32306d8e876054588c801"},
    {242, "072e20481c29ac23953702a09aec1bd04fd602a5"},
    {255, "43b5db35a59c3de65bd06a378be1757f460f451a"},
    {256, "7be7ecd665283f79dd3a50da4507c8b17d5485b2"},
    {257, "1227967013cf58cc49dce1d4a72c8533fd37d938"},
    {300, "7f577abd3efa9fd54950df39dc8905b0c18e814f"},
    {511, "5de7c011e9acbf622bf1a51780522c026f96f4b9"},
    {512, "d2547a3564ee46728d7c7e513ac3af88795a1009"},
    {513, "30b95f2f73b52a497dc212389b21a05b1e4e2b77"},
    {1000, "07bef519eb3f0d63ef6c999d1c7f80c7c404032e"},
    {1023, "9914fa711bc1b825d7cca983ab382f39509cf278"},
    {1024, "27f5437d5dd60a0b696464ec473256dda66f0059"},
    {1025, "4e6ee14ccc4316b018f3db59e214518e69082876"},
    {1087, "d58505bb10d5198746a9a556b9e12505f5e3608b"},
    {1088, "c301fe96b24c128180a0f7cbabb1a35e2bf636a5"},
    {1089, "ab41ff5794c33329ca63715e9698372bba604720"},
    {2047, "8c42f0bd11e9d649d6a53b56876695c9f4e1d483"},
    {2048, "93c2329bee11e3821784ab814453f5572ce74648"},
    {2049, "0f2f7682961c8dca23637716055444c4f980ada5"},
    {3000, "aca492e07d8e63d5392fbfcf057b068a6d9d7d90"},
    {4096, "a06ff8678d5b1e70f1fc91d97f48ff3c4e456a92"},
    {5000, "76a22691a2ea20adf2bb886249109c0092b71047"},
    {8191, "2f8e6de838a849b000bf9a0ae5a8d69ef00210c4"},
    {10000, "cd501894443293ad297a6d7772a6e6820c96a856"},
};

static const struct vec32 murmur2_vectors[] = {
    {0, 0x00000000u, 0x00000000u},
    {0, 0x00000001u, 0x5bd15e36u},
    {0, 0x9747b28cu, 0x106e08d9u},
    {0, 0xffffffffu, 0xb35966b0u},
    {1, 0x00000000u, 0xe94e6ebdu},
    {1, 0x00000001u, 0x00000000u},
    {1, 0x9747b28cu, 0x166197bcu},
    {1, 0xffffffffu, 0x992c0759u},
    {2, 0x00000000u, 0xd603d290u},
    {2, 0x00000001u, 0xb01dae53u},
    {2, 0x9747b28cu, 0xba7db08au},
    {2, 0xffffffffu, 0xf4575f52u},
    {3, 0x00000000u, 0x4288a69au},
    {3, 0x00000001u, 0x6af6b158u},
    {3, 0x9747b28cu, 0x0f1b2811u},
    {3, 0xffffffffu, 0xceb50142u},
    {4, 0x00000000u, 0xdca9368bu},
    {4, 0x00000001u, 0x1e2936c4u},
    {4, 0x9747b28cu, 0xb724efa5u},
    {4, 0xffffffffu, 0x8613f80eu},
    {5, 0x00000000u, 0x8716f93bu},
    {5, 0x00000001u, 0x32328966u},
    {5, 0x9747b28cu, 0xf23aed7fu},
    {5, 0xffffffffu, 0xc2ec4157u},
    {6, 0x00000000u, 0x7e1030c1u},
    {6, 0x00000001u, 0xecdfb1cfu},
    {6, 0x9747b28cu, 0x6a478585u},
    {6, 0xffffffffu, 0x81bbd32eu},
    {7, 0x00000000u, 0x2afe38d7u},
    {7, 0x00000001u, 0xae768d97u},
    {7, 0x9747b28cu, 0x0acaeb0du},
    {7, 0xffffffffu, 0x25fcc969u},
    {8, 0x00000000u, 0xd2c37894u},
    {8, 0x00000001u, 0x242c169bu},
    {8, 0x9747b28cu, 0x60a47df2u},
    {8, 0xffffffffu, 0xcc7fe687u},
    {9, 0x00000000u, 0xcbcb1763u},
    {9, 0x00000001u, 0xb6883e1du},
    {9, 0x9747b28cu, 0xacf3a8dcu},
    {9, 0xffffffffu, 0x04c577e2u},
    {10, 0x00000000u, 0x8de73ad6u},
    {10, 0x00000001u, 0x65e0e395u},
    {10, 0x9747b28cu, 0x050efc76u},
    {10, 0xffffffffu, 0x806b38a0u},
    {11, 0x00000000u, 0x66e250c0u},
    {11, 0x00000001u, 0xebb04ec9u},
    {11, 0x9747b28cu, 0xbe0a31bdu},
    {11, 0xffffffffu, 0x83a5818au},
    {12, 0x00000000u, 0xe7c1c407u},
    {12, 0x00000001u, 0x2764d6d6u},
    {12, 0x9747b28cu, 0x8d8cd6f5u},
    {12, 0xffffffffu, 0x163685aeu},
    {13, 0x00000000u, 0x9a760573u},
    {13, 0x00000001u, 0x3867acd9u},
    {13, 0x9747b28cu, 0x0afdc915u},
    {13, 0xffffffffu, 0x19a61c5bu},
    {14, 0x00000000u, 0x3c19cc76u},
    {14, 0x00000001u, 0xbfec941au},
    {14, 0x9747b28cu, 0xc4478743u},
    {14, 0xffffffffu, 0x280d2013u},
    {15, 0x00000000u, 0x487f5396u},
    {15, 0x00000001u, 0x72244c84u},
    {15, 0x9747b28cu, 0x1637af63u},
    {15, 0xffffffffu, 0x2c231e5fu},
    {16, 0x00000000u, 0xd8b3d10eu},
    {16, 0x00000001u, 0x166d9effu},
    {16, 0x9747b28cu, 0x19001f96u},
    {16, 0xffffffffu, 0x0a1ca156u},
    {17, 0x00000000u, 0x35a49906u},
    {17, 0x00000001u, 0xfe3273f5u},
    {17, 0x9747b28cu, 0x70521fe8u},
    {17, 0xffffffffu, 0x8f9cea38u},
    {18, 0x00000000u, 0x51d6d8f7u},
    {18, 0x00000001u, 0xd733011du},
    {18, 0x9747b28cu, 0xeaabb337u},
    {18, 0xffffffffu, 0x9dc0dffbu},
    {19, 0x00000000u, 0x26b0fa01u},
    {19, 0x00000001u, 0x8baa4cb5u},
    {19, 0x9747b28cu, 0x94d6b7fdu},
    {19, 0xffffffffu, 0xf998a74fu},
    {20, 0x00000000u, 0x68dcbc14u},
    {20, 0x00000001u, 0xc6cd8f7bu},
    {20, 0x9747b28cu, 0x09762750u},
    {20, 0xffffffffu, 0x9cb4d1c7u},
    {21, 0x00000000u, 0xe2d886f6u},
    {21, 0x00000001u, 0xc29515feu},
    {21, 0x9747b28cu, 0x1bd85c8eu},
    {21, 0xffffffffu, 0xe783741eu},
    {22, 0x00000000u, 0x65bcdc55u},
    {22, 0x00000001u, 0x9c03696bu},
    {22, 0x9747b28cu, 0xd6de4f48u},
    {22, 0xffffffffu, 0x11f15220u},
    {23, 0x00000000u, 0xe856e881u},
    {23, 0x00000001u, 0xec15f5c5u},
    {23, 0x9747b28cu, 0xe77b6786u},
    {23, 0xffffffffu, 0x9d0eecadu},
    {24, 0x00000000u, 0x18d1f4a2u},
    {24, 0x00000001u, 0x3c377618u},
    {24, 0x9747b28cu, 0xd0c7ca32u},
    {24, 0xffffffffu, 0x361a9a2bu},
    {25, 0x00000000u, 0x4f9c17e6u},
    {25, 0x00000001u, 0xb5e1542cu},
    {25, 0x9747b28cu, 0x0bdb20d5u},
    {25, 0xffffffffu, 0x096d5b77u},
    {26, 0x00000000u, 0xb1d50dd5u},
    {26, 0x00000001u, 0x971f9973u},
    {26, 0x9747b28cu, 0x9832d608u},
    {26, 0xffffffffu, 0x76c6ee82u},
    {27, 0x00000000u, 0xa54fc60bu},
    {27, 0x00000001u, 0x6d04f86du},
    {27, 0x9747b28cu, 0x255c9684u},
    {27, 0xffffffffu, 0x5c270137u},
    {28, 0x00000000u, 0x7b55197fu},
    {28, 0x00000001u, 0x8fb36e65u},
    {28, 0x9747b28cu, 0xb461a011u},
    {28, 0xffffffffu, 0xbf96e494u},
    {29, 0x00000000u, 0xd458b72eu},
    {29, 0x00000001u, 0x3d58c7dcu},
    {29, 0x9747b28cu, 0x33754196u},
    {29, 0xffffffffu, 0x4cd377b7u},
    {30, 0x00000000u, 0x46ad8b6cu},
    {30, 0x00000001u, 0xa7ee511du},
    {30, 0x9747b28cu, 0xe6f29ee4u},
    {30, 0xffffffffu, 0x8ab85792u},
    {31, 0x00000000u, 0x50a60c3eu},
    {31, 0x00000001u, 0x8ef88915u},
    {31, 0x9747b28cu, 0x88766025u},
    {31, 0xffffffffu, 0x00d1f86bu},
    {32, 0x00000000u, 0xe9e16387u},
    {32, 0x00000001u, 0x13a93d37u},
    {32, 0x9747b28cu, 0xddc7df05u},
    {32, 0xffffffffu, 0x07f8bc3fu},
    {33, 0x00000000u, 0x2f956ff4u},
    {33, 0x00000001u, 0x8cae3c67u},
    {33, 0x9747b28cu, 0x0217b67fu},
    {33, 0xffffffffu, 0xd61ec460u},
    {47, 0x00000000u, 0x9df1b519u},
    {47, 0x00000001u, 0xed3014b3u},
    {47, 0x9747b28cu, 0xd7fe2c6du},
    {47, 0xffffffffu, 0xeb5b5160u},
    {48, 0x00000000u, 0x16506a61u},
    {48, 0x00000001u, 0x0290e683u},
    {48, 0x9747b28cu, 0xe3ece86du},
    {48, 0xffffffffu, 0x097477a8u},
    {55, 0x00000000u, 0xdcb85ce7u},
    {55, 0x00000001u, 0xe54844b5u},
    {55, 0x9747b28cu, 0xf248d1bcu},
    {55, 0xffffffffu, 0xb547a8edu},
    {56, 0x00000000u, 0x1902a174u},
    {56, 0x00000001u, 0x822aceebu},
    {56, 0x9747b28cu, 0x98083c01u},
    {56, 0xffffffffu, 0x6a456d73u},
    {57, 0x00000000u, 0x94f2bd54u},
    {57, 0x00000001u, 0x0d56aef3u},
    {57, 0x9747b28cu, 0x787847beu},
    {57, 0xffffffffu, 0x04aa43b6u},
    {63, 0x00000000u, 0xaaeb0faau},
    {63, 0x00000001u, 0x1999a480u},
    {63, 0x9747b28cu, 0x75308f22u},
    {63, 0xffffffffu, 0xc69b0a5au},
    {64, 0x00000000u, 0xb4d83f80u},
    {64, 0x00000001u, 0xe1054eb4u},
    {64, 0x9747b28cu, 0x6d26b52eu},
    {64, 0xffffffffu, 0xcb05b9bfu},
    {65, 0x00000000u, 0x81e5e74bu},
    {65, 0x00000001u, 0x55ee4c31u},
    {65, 0x9747b28cu, 0x778fd78cu},
    {65, 0xffffffffu, 0xf89f67a8u},
    {95, 0x00000000u, 0x27658cf9u},
    {95, 0x00000001u, 0xa0c9f973u},
    {95, 0x9747b28cu, 0x88dc6640u},
    {95, 0xffffffffu, 0xbe08a3f2u},
    {96, 0x00000000u, 0x2df5e699u},
    {96, 0x00000001u, 0x1b04fa3eu},
    {96, 0x9747b28cu, 0x37b1b735u},
    {96, 0xffffffffu, 0xa1b301cdu},
    {97, 0x00000000u, 0xdb70751cu},
    {97, 0x00000001u, 0xeafe8e86u},
    {97, 0x9747b28cu, 0xf4f773dau},
    {97, 0xffffffffu, 0x664f45cbu},
    {100, 0x00000000u, 0x9e363f6bu},
    {100, 0x00000001u, 0xcf9abbfau},
    {100, 0x9747b28cu, 0x7e000708u},
    {100, 0xffffffffu, 0x42de24deu},
    {119, 0x00000000u, 0x2391ce02u},
    {119, 0x00000001u, 0x37c21849u},
    {119, 0x9747b28cu, 0xfc169ad0u},
    {119, 0xffffffffu, 0x745f62feu},
    {120, 0x00000000u, 0x24e80996u},
    {120, 0x00000001u, 0x6b1bee01u},
    {120, 0x9747b28cu, 0x71b71ca0u},
    {120, 0xffffffffu, 0xee09eaabu},
    {127, 0x00000000u, 0x5ddec290u},
    {127, 0x00000001u, 0xff2ab88bu},
    {127, 0x9747b28cu, 0xb0dd7b40u},
    {127, 0xffffffffu, 0xcad3971du},
    {128, 0x00000000u, 0x0a6a534au},
    {128, 0x00000001u, 0xfd531ce0u},
    {128, 0x9747b28cu, 0x71914715u},
    {128, 0xffffffffu, 0xe8c64c12u},
    {129, 0x00000000u, 0x601f64b7u},
    {129, 0x00000001u, 0x02e8c53fu},
    {129, 0x9747b28cu, 0x666a3a2du},
    {129, 0xffffffffu, 0xf6b5a6e2u},
    {130, 0x00000000u, 0x18ce26d8u},
    {130, 0x00000001u, 0x43c4ca7du},
    {130, 0x9747b28cu, 0x21026343u},
    {130, 0xffffffffu, 0xbdfb890cu},
    {143, 0x00000000u, 0x69c8720bu},
    {143, 0x00000001u, 0x233c2da2u},
    {143, 0x9747b28cu, 0xda0b92edu},
    {143, 0xffffffffu, 0x0bb5b8e1u},
    {144, 0x00000000u, 0x2a2307a2u},
    {144, 0x00000001u, 0x5a212412u},
    {144, 0x9747b28cu, 0x04cfd3bcu},
    {144, 0xffffffffu, 0x60f1f46du},
    {200, 0x00000000u, 0x271158b5u},
    {200, 0x00000001u, 0x9ec3e07fu},
    {200, 0x9747b28cu, 0x118c480fu},
    {200, 0xffffffffu, 0xf9b89a81u},
    {239, 0x00000000u, 0x14824daeu},
    {239, 0x00000001u, 0x52fcd078u},
    {239, 0x9747b28cu, 0xddeaa291u},
    {239, 0xffffffffu, 0x64daca9fu},
    {240, 0x00000000u, 0xc4a2e951u},
    {240, 0x00000001u, 0xc1ca2726u},
    {240, 0x9747b28cu, 0x175abdcau},
    {240, 0xffffffffu, 0xf85658e1u},
    {241, 0x00000000u, 0x7009694du},
    {241, 0x00000001u, 0xf0681ebau},
    {241, 0x9747b28cu, 0xfe0ef5cdu},
    {241, 0xffffffffu, 0xff65ed08u},
    {242, 0x00000000u, 0xf20c4564u},
    {242, 0x00000001u, 0x1d6ca4e3u},
    {242, 0x9747b28cu, 0x035bb4f7u},
    {242, 0xffffffffu, 0x5d7d5660u},
    {255, 0x00000000u, 0x961f1c10u},
    {255, 0x00000001u, 0x072040b8u},
    {255, 0x9747b28cu, 0x0455605fu},
    {255, 0xffffffffu, 0xbbfe7174u},
    {256, 0x00000000u, 0x3b1b534bu},
    {256, 0x00000001u, 0x356edadfu},
    {256, 0x9747b28cu, 0x12dc066bu},
    {256, 0xffffffffu, 0x1833b3a0u},
    {257, 0x00000000u, 0x66f1f465u},
    {257, 0x00000001u, 0xbee610fau},
    {257, 0x9747b28cu, 0xea1bcc93u},
    {257, 0xffffffffu, 0x2811e49du},
    {300, 0x00000000u, 0xa18befabu},
    {300, 0x00000001u, 0x6cbe13d0u},
    {300, 0x9747b28cu, 0xeb87a9afu},
    {300, 0xffffffffu, 0x6919cbffu},
    {511, 0x00000000u, 0xc56c216eu},
    {511, 0x00000001u, 0x59d0996du},
    {511, 0x9747b28cu, 0x5db3cd0au},
    {511, 0xffffffffu, 0xe77472f9u},
    {512, 0x00000000u, 0xbda9d901u},
    {512, 0x00000001u, 0xcbf53efeu},
    {512, 0x9747b28cu, 0x8f9e209cu},
    {512, 0xffffffffu, 0x8e5904a0u},
    {513, 0x00000000u, 0x65167420u},
    {513, 0x00000001u, 0x827821a6u},
    {513, 0x9747b28cu, 0x2a55533cu},
    {513, 0xffffffffu, 0x5492dfa8u},
    {1000, 0x00000000u, 0x4ce35a88u},
    {1000, 0x00000001u, 0x396785b6u},
    {1000, 0x9747b28cu, 0x7d75713du},
    {1000, 0xffffffffu, 0xdca673edu},
    {1023, 0x00000000u, 0xb904b012u},
    {1023, 0x00000001u, 0xb44a14bbu},
    {1023, 0x9747b28cu, 0x63c0238fu},
    {1023, 0xffffffffu, 0x2f3d87c2u},
    {1024, 0x00000000u, 0x94c4c161u},
    {1024, 0x00000001u, 0x8f2f07c0u},
    {1024, 0x9747b28cu, 0x3fc0a31au},
    {1024, 0xffffffffu, 0x9c09b58cu},
    {1025, 0x00000000u, 0xe69ca411u},
    {1025, 0x00000001u, 0xd26d6350u},
    {1025, 0x9747b28cu, 0xf0423321u},
    {1025, 0xffffffffu, 0x763073c3u},
    {1087, 0x00000000u, 0xf3ffbdc3u},
    {1087, 0x00000001u, 0x77e12fa2u},
    {1087, 0x9747b28cu, 0x27da2391u},
    {1087, 0xffffffffu, 0x11886fa9u},
    {1088, 0x00000000u, 0xee15bf2cu},
    {1088, 0x00000001u, 0xbbf06956u},
    {1088, 0x9747b28cu, 0xd9d6c8e1u},
    {1088, 0xffffffffu, 0xdf6b8d62u},
    {1089, 0x00000000u, 0x17064f9au},
    {1089, 0x00000001u, 0x78120e31u},
    {1089, 0x9747b28cu, 0x33eb8a55u},
    {1089, 0xffffffffu, 0x495be6a1u},
    {2047, 0x00000000u, 0x9b57f0cdu},
    {2047, 0x00000001u, 0xdc7b03acu},
    {2047, 0x9747b28cu, 0x621380dcu},
    {2047, 0xffffffffu, 0x07f34504u},
    {2048, 0x00000000u, 0xb4c21cb5u},
    {2048, 0x00000001u, 0x712713d7u},
    {2048, 0x9747b28cu, 0x8218dd6bu},
    {2048, 0xffffffffu, 0x2728d668u},
    {2049, 0x00000000u, 0xcd744060u},
    {2049, 0x00000001u, 0x69e2eaf4u},
    {2049, 0x9747b28cu, 0x691a8c49u},
    {2049, 0xffffffffu, 0x0b02a899u},
    {3000, 0x00000000u, 0x350f5967u},
    {3000, 0x00000001u, 0x14d09c48u},
    {3000, 0x9747b28cu, 0xa691e3ffu},
    {3000, 0xffffffffu, 0x19b3fc75u},
    {4096, 0x00000000u, 0x77ab0a27u},
    {4096, 0x00000001u, 0x4c8eb8aau},
    {4096, 0x9747b28cu, 0xae00ad0cu},
    {4096, 0xffffffffu, 0x056f0517u},
    {5000, 0x00000000u, 0x1ee90441u},
    {5000, 0x00000001u, 0xa59bd53au},
    {5000, 0x9747b28cu, 0xc94a2cc7u},
    {5000, 0xffffffffu, 0x52a0e4f9u},
    {8191, 0x00000000u, 0x3a3fe8a3u},
    {8191, 0x00000001u, 0x3842dc2fu},
    {8191, 0x9747b28cu, 0x2a4bbb57u},
    {8191, 0xffffffffu, 0x664730bbu},
    {10000, 0x00000000u, 0x710e6d7bu},
    {10000, 0x00000001u, 0x70baa13cu},
    {10000, 0x9747b28cu, 0x09f5b52eu},
    {10000, 0xffffffffu, 0x04f0fa0eu},
};

static const struct vec32 murmur3_vectors[] = {
    {0, 0x00000000u, 0x00000000u},
    {0, 0x00000001u, 0x514e28b7u},
    {0, 0x9747b28cu, 0xebb6c228u},
    {0, 0xffffffffu, 0x81f16f39u},
    {1, 0x00000000u, 0x514e28b7u},
    {1, 0x00000001u, 0x00000000u},
    {1, 0x9747b28cu, 0x2933bea8u},
    {1, 0xffffffffu, 0x7995c304u},
    {2, 0x00000000u, 0x65c052beu},
    {2, 0x00000001u, 0xdf1d4f0bu},
    {2, 0x9747b28cu, 0xa4e79862u},
    {2, 0xffffffffu, 0x2bb5af13u},
    {3, 0x00000000u, 0xf2ee35dbu},
    {3, 0x00000001u, 0x49bc11b8u},
    {3, 0x9747b28cu, 0x2e98e24eu},
    {3, 0xffffffffu, 0xf15e1e43u},
    {4, 0x00000000u, 0xeb017c30u},
    {4, 0x00000001u, 0x76efb709u},
    {4, 0x9747b28cu, 0xa1b60253u},
    {4, 0xffffffffu, 0x45c3cd9du},
    {5, 0x00000000u, 0xda6c4b20u},
    {5, 0x00000001u, 0x8c7fec8fu},
    {5, 0x9747b28cu, 0xa5227b03u},
    {5, 0xffffffffu, 0x80c5ab74u},
    {6, 0x00000000u, 0x7fb54626u},
    {6, 0x00000001u, 0x7928b243u},
    {6, 0x9747b28cu, 0x6b35cb2eu},
    {6, 0xffffffffu, 0x231254c1u},
    {7, 0x00000000u, 0xe1516edeu},
    {7, 0x00000001u, 0xade18606u},
    {7, 0x9747b28cu, 0x7f0e9329u},
    {7, 0xffffffffu, 0xc9272820u},
    {8, 0x00000000u, 0x1f54b6bfu},
    {8, 0x00000001u, 0x49697c8cu},
    {8, 0x9747b28cu, 0xd34f332bu},
    {8, 0xffffffffu, 0x7f74a963u},
    {9, 0x00000000u, 0x073b9312u},
    {9, 0x00000001u, 0xc996ec9cu},
    {9, 0x9747b28cu, 0xa1ba7554u},
    {9, 0xffffffffu, 0x80c325abu},
    {10, 0x00000000u, 0xc52a374du},
    {10, 0x00000001u, 0xe2bc4755u},
    {10, 0x9747b28cu, 0x9c4e689cu},
    {10, 0xffffffffu, 0x9af848bcu},
    {11, 0x00000000u, 0x2631a79fu},
    {11, 0x00000001u, 0x04034fceu},
    {11, 0x9747b28cu, 0x44cbdd47u},
    {11, 0xffffffffu, 0x8347e882u},
    {12, 0x00000000u, 0x00ecd100u},
    {12, 0x00000001u, 0x2a3fed82u},
    {12, 0x9747b28cu, 0xd4076578u},
    {12, 0xffffffffu, 0x1eeea369u},
    {13, 0x00000000u, 0x25252905u},
    {13, 0x00000001u, 0xd759a495u},
    {13, 0x9747b28cu, 0xce8b1455u},
    {13, 0xffffffffu, 0x878bc54eu},
    {14, 0x00000000u, 0xb0d0b531u},
    {14, 0x00000001u, 0xa67c69b1u},
    {14, 0x9747b28cu, 0x6ad7b2efu},
    {14, 0xffffffffu, 0x41cb0849u},
    {15, 0x00000000u, 0xa474464eu},
    {15, 0x00000001u, 0xd82d09e3u},
    {15, 0x9747b28cu, 0xf02989ceu},
    {15, 0xffffffffu, 0x2ab93f62u},
    {16, 0x00000000u, 0x2038e935u},
    {16, 0x00000001u, 0xf8e25d8eu},
    {16, 0x9747b28cu, 0xffceec38u},
    {16, 0xffffffffu, 0x1ea040ebu},
    {17, 0x00000000u, 0x563d4e2au},
    {17, 0x00000001u, 0xceb8d6ffu},
    {17, 0x9747b28cu, 0xc5515633u},
    {17, 0xffffffffu, 0xeb398a91u},
    {18, 0x00000000u, 0xf1595b47u},
    {18, 0x00000001u, 0x5c1ff2d4u},
    {18, 0x9747b28cu, 0xdef6d27bu},
    {18, 0xffffffffu, 0x814139f8u},
    {19, 0x00000000u, 0x60fd50e1u},
    {19, 0x00000001u, 0x93d67722u},
    {19, 0x9747b28cu, 0x69231066u},
    {19, 0xffffffffu, 0xc19d976eu},
    {20, 0x00000000u, 0x8398669bu},
    {20, 0x00000001u, 0x480c9244u},
    {20, 0x9747b28cu, 0x959ed562u},
    {20, 0xffffffffu, 0x915a4123u},
    {21, 0x00000000u, 0xb797f157u},
    {21, 0x00000001u, 0xd4442daau},
    {21, 0x9747b28cu, 0x24a68b2fu},
    {21, 0xffffffffu, 0xff7ef694u},
    {22, 0x00000000u, 0xa8d38827u},
    {22, 0x00000001u, 0x9a17003du},
    {22, 0x9747b28cu, 0xf6e56abeu},
    {22, 0xffffffffu, 0x422dcac2u},
    {23, 0x00000000u, 0xdb7b83dau},
    {23, 0x00000001u, 0x418d7e28u},
    {23, 0x9747b28cu, 0x384b4333u},
    {23, 0xffffffffu, 0x106d5b06u},
    {24, 0x00000000u, 0xfd9d7915u},
    {24, 0x00000001u, 0x6762eaecu},
    {24, 0x9747b28cu, 0x9be33db1u},
    {24, 0xffffffffu, 0x548a18d8u},
    {25, 0x00000000u, 0x9d82e318u},
    {25, 0x00000001u, 0x897f9b04u},
    {25, 0x9747b28cu, 0x8405f1a5u},
    {25, 0xffffffffu, 0xbdaa901bu},
    {26, 0x00000000u, 0xe687faa3u},
    {26, 0x00000001u, 0x79724bd2u},
    {26, 0x9747b28cu, 0x43fca77bu},
    {26, 0xffffffffu, 0x1b767938u},
    {27, 0x00000000u, 0x2f102c34u},
    {27, 0x00000001u, 0x7ee1a169u},
    {27, 0x9747b28cu, 0xca667372u},
    {27, 0xffffffffu, 0xb2df09f1u},
    {28, 0x00000000u, 0x8d02ee35u},
    {28, 0x00000001u, 0x31b1dcb6u},
    {28, 0x9747b28cu, 0xbd0a6e6cu},
    {28, 0xffffffffu, 0x537be14eu},
    {29, 0x00000000u, 0xc9af410au},
    {29, 0x00000001u, 0x225e66fau},
    {29, 0x9747b28cu, 0xafad2af0u},
    {29, 0xffffffffu, 0xa30d9c68u},
    {30, 0x00000000u, 0x1f77742du},
    {30, 0x00000001u, 0xe407fb3cu},
    {30, 0x9747b28cu, 0x2d31eb8bu},
    {30, 0xffffffffu, 0xc5efc1e1u},
    {31, 0x00000000u, 0x78dda169u},
    {31, 0x00000001u, 0xeb8b8096u},
    {31, 0x9747b28cu, 0x639778ffu},
    {31, 0xffffffffu, 0xd8a4851au},
    {32, 0x00000000u, 0xc67bc176u},
    {32, 0x00000001u, 0x34f09b7bu},
    {32, 0x9747b28cu, 0x98591458u},
    {32, 0xffffffffu, 0xf18981f9u},
    {33, 0x00000000u, 0xeb5f0f38u},
    {33, 0x00000001u, 0xabef94afu},
    {33, 0x9747b28cu, 0x0f0ca200u},
    {33, 0xffffffffu, 0x8b25c3b8u},
    {47, 0x00000000u, 0xc82b91c5u},
    {47, 0x00000001u, 0x6ea9a32fu},
    {47, 0x9747b28cu, 0xc779673eu},
    {47, 0xffffffffu, 0xe1fb8e7fu},
    {48, 0x00000000u, 0xdf2db557u},
    {48, 0x00000001u, 0x1704c187u},
    {48, 0x9747b28cu, 0x188f7d91u},
    {48, 0xffffffffu, 0x96f589efu},
    {55, 0x00000000u, 0x58fc22d1u},
    {55, 0x00000001u, 0x2703948eu},
    {55, 0x9747b28cu, 0x78f50223u},
    {55, 0xffffffffu, 0x81c995fdu},
    {56, 0x00000000u, 0x91143639u},
    {56, 0x00000001u, 0x2583c237u},
    {56, 0x9747b28cu, 0x1fc4394eu},
    {56, 0xffffffffu, 0x7e1bd782u},
    {57, 0x00000000u, 0xe8f1c120u},
    {57, 0x00000001u, 0x065fb66eu},
    {57, 0x9747b28cu, 0x07488995u},
    {57, 0xffffffffu, 0x85f6a8b4u},
    {63, 0x00000000u, 0x94936007u},
    {63, 0x00000001u, 0x6ffcaa97u},
    {63, 0x9747b28cu, 0x75d7a187u},
    {63, 0xffffffffu, 0xb9516cc9u},
    {64, 0x00000000u, 0xda8ed9b5u},
    {64, 0x00000001u, 0x077c7d60u},
    {64, 0x9747b28cu, 0x3e7a1115u},
    {64, 0xffffffffu, 0x00f20e5bu},
    {65, 0x00000000u, 0x36aadb58u},
    {65, 0x00000001u, 0xb8d8f868u},
    {65, 0x9747b28cu, 0x30ba84dau},
    {65, 0xffffffffu, 0x78194a75u},
    {95, 0x00000000u, 0x76d5c514u},
    {95, 0x00000001u, 0xd76bb461u},
    {95, 0x9747b28cu, 0xa77792aau},
    {95, 0xffffffffu, 0x1569ebc6u},
    {96, 0x00000000u, 0x358ec661u},
    {96, 0x00000001u, 0x85a9a284u},
    {96, 0x9747b28cu, 0xe76df625u},
    {96, 0xffffffffu, 0x2dfa9112u},
    {97, 0x00000000u, 0x9a670681u},
    {97, 0x00000001u, 0x8d6de395u},
    {97, 0x9747b28cu, 0x877a82eau},
    {97, 0xffffffffu, 0x7bbdab0fu},
    {100, 0x00000000u, 0x9ac645bcu},
    {100, 0x00000001u, 0x10884e2cu},
    {100, 0x9747b28cu, 0x5f61283au},
    {100, 0xffffffffu, 0x20ead1a5u},
    {119, 0x00000000u, 0xe0f1af59u},
    {119, 0x00000001u, 0x82d85ddau},
    {119, 0x9747b28cu, 0xe0f47aacu},
    {119, 0xffffffffu, 0xa5300869u},
    {120, 0x00000000u, 0x7207cfa7u},
    {120, 0x00000001u, 0x4ae041ffu},
    {120, 0x9747b28cu, 0x86ad8dccu},
    {120, 0xffffffffu, 0xfb46b028u},
    {127, 0x00000000u, 0x77e0cd2fu},
    {127, 0x00000001u, 0x96dc59c0u},
    {127, 0x9747b28cu, 0xa5e06e3bu},
    {127, 0xffffffffu, 0xda967ba6u},
    {128, 0x00000000u, 0x21204396u},
    {128, 0x00000001u, 0xfba16f28u},
    {128, 0x9747b28cu, 0xf2ce1e50u},
    {128, 0xffffffffu, 0xc4bc070bu},
    {129, 0x00000000u, 0x35c90ab2u},
    {129, 0x00000001u, 0x9908e7b4u},
    {129, 0x9747b28cu, 0xb508a043u},
    {129, 0xffffffffu, 0x323a2e9du},
    {130, 0x00000000u, 0xbf262a2au},
    {130, 0x00000001u, 0x3c30c0f6u},
    {130, 0x9747b28cu, 0x0bd3d876u},
    {130, 0xffffffffu, 0x3014f6dau},
    {143, 0x00000000u, 0xd2428539u},
    {143, 0x00000001u, 0x073945e5u},
    {143, 0x9747b28cu, 0xc2aee9dfu},
    {143, 0xffffffffu, 0x303eec4du},
    {144, 0x00000000u, 0x319d8707u},
    {144, 0x00000001u, 0xed7f84edu},
    {144, 0x9747b28cu, 0x8e7a3921u},
    {144, 0xffffffffu, 0x72735d72u},
    {200, 0x00000000u, 0x58807b57u},
    {200, 0x00000001u, 0x901ec4cbu},
    {200, 0x9747b28cu, 0x2514cab9u},
    {200, 0xffffffffu, 0x58d0fefbu},
    {239, 0x00000000u, 0xb5961e0eu},
    {239, 0x00000001u, 0x9bfe42b2u},
    {239, 0x9747b28cu, 0x59d018d6u},
    {239, 0xffffffffu, 0xdc2daeecu},
    {240, 0x00000000u, 0xa9100101u},
    {240, 0x00000001u, 0xbaf3a204u},
    {240, 0x9747b28cu, 0xa5129af3u},
    {240, 0xffffffffu, 0x0e6ea5d2u},
    {241, 0x00000000u, 0x93c74414u},
    {241, 0x00000001u, 0xcdccd133u},
    {241, 0x9747b28cu, 0x31b28aacu},
    {241, 0xffffffffu, 0x388670fau},
    {242, 0x00000000u, 0x3dcd243du},
    {242, 0x00000001u, 0x4a65f38fu},
    {242, 0x9747b28cu, 0xeb386918u},
    {242, 0xffffffffu, 0x6480b644u},
    {255, 0x00000000u, 0x2230aba1u},
    {255, 0x00000001u, 0xd684217cu},
    {255, 0x9747b28cu, 0xb4e414fcu},
    {255, 0xffffffffu, 0x5edf4766u},
    {256, 0x00000000u, 0xf6969b28u},
    {256, 0x00000001u, 0x5264a9f6u},
    {256, 0x9747b28cu, 0xc6bd42d3u},
    {256, 0xffffffffu, 0x81232593u},
    {257, 0x00000000u, 0x8037defau},
    {257, 0x00000001u, 0xa45a74dfu},
    {257, 0x9747b28cu, 0xd704bf04u},
    {257, 0xffffffffu, 0x381a9acbu},
    {300, 0x00000000u, 0xfcb858c4u},
    {300, 0x00000001u, 0x74926f72u},
    {300, 0x9747b28cu, 0x706d7a80u},
    {300, 0xffffffffu, 0x8e942c0fu},
    {511, 0x00000000u, 0x4e47854au},
    {511, 0x00000001u, 0x7475ec89u},
    {511, 0x9747b28cu, 0x72caa78du},
    {511, 0xffffffffu, 0x59581d3du},
    {512, 0x00000000u, 0xc169a056u},
    {512, 0x00000001u, 0xb5535767u},
    {512, 0x9747b28cu, 0x492f5b00u},
    {512, 0xffffffffu, 0x7f99b833u},
    {513, 0x00000000u, 0xea566e26u},
    {513, 0x00000001u, 0x403f35fbu},
    {513, 0x9747b28cu, 0x8eed1fbdu},
    {513, 0xffffffffu, 0x49e9976au},
    {1000, 0x00000000u, 0xcb628773u},
    {1000, 0x00000001u, 0x8040b58eu},
    {1000, 0x9747b28cu, 0xe7c81f09u},
    {1000, 0xffffffffu, 0x9ef51892u},
    {1023, 0x00000000u, 0x4adc37f8u},
    {1023, 0x00000001u, 0x68b2cdecu},
    {1023, 0x9747b28cu, 0x71b1fc1du},
    {1023, 0xffffffffu, 0xacd0951bu},
    {1024, 0x00000000u, 0xa2259121u},
    {1024, 0x00000001u, 0xc2d68d31u},
    {1024, 0x9747b28cu, 0xff12dac8u},
    {1024, 0xffffffffu, 0xe7d72785u},
    {1025, 0x00000000u, 0x7bbd4cf5u},
    {1025, 0x00000001u, 0x63b92525u},
    {1025, 0x9747b28cu, 0xc95e8b18u},
    {1025, 0xffffffffu, 0xc4241245u},
    {1087, 0x00000000u, 0x9814a0bau},
    {1087, 0x00000001u, 0x3cd2ef75u},
    {1087, 0x9747b28cu, 0x7e41bdb5u},
    {1087, 0xffffffffu, 0xdd4e4d55u},
    {1088, 0x00000000u, 0x8c5b3acbu},
    {1088, 0x00000001u, 0x84cd3f76u},
    {1088, 0x9747b28cu, 0xacba02b3u},
    {1088, 0xffffffffu, 0xdf06e028u},
    {1089, 0x00000000u, 0x5ffa7839u},
    {1089, 0x00000001u, 0x85a0d55cu},
    {1089, 0x9747b28cu, 0x9b313bebu},
    {1089, 0xffffffffu, 0xe1433079u},
    {2047, 0x00000000u, 0x5dd9201au},
    {2047, 0x00000001u, 0xf6b3cdccu},
    {2047, 0x9747b28cu, 0xbe229cf5u},
    {2047, 0xffffffffu, 0x02cf3c61u},
    {2048, 0x00000000u, 0xc0f8bfd6u},
    {2048, 0x00000001u, 0x37c56837u},
    {2048, 0x9747b28cu, 0x9cc2bf75u},
    {2048, 0xffffffffu, 0x385f48dau},
    {2049, 0x00000000u, 0x54523961u},
    {2049, 0x00000001u, 0xdb0686dfu},
    {2049, 0x9747b28cu, 0xbb2e152eu},
    {2049, 0xffffffffu, 0xcc881009u},
    {3000, 0x00000000u, 0xb680d556u},
    {3000, 0x00000001u, 0x67bbee6au},
    {3000, 0x9747b28cu, 0x1fb9a3c5u},
    {3000, 0xffffffffu, 0x5b8dbb67u},
    {4096, 0x00000000u, 0x4a56d10cu},
    {4096, 0x00000001u, 0x1650a46bu},
    {4096, 0x9747b28cu, 0x7f5d8691u},
    {4096, 0xffffffffu, 0xa5f0ab5cu},
    {5000, 0x00000000u, 0x7ef14df7u},
    {5000, 0x00000001u, 0xa2b2bebcu},
    {5000, 0x9747b28cu, 0x39b6a442u},
    {5000, 0xffffffffu, 0xe65d5027u},
    {8191, 0x00000000u, 0x3ccb5c7fu},
    {8191, 0x00000001u, 0x87f6abebu},
    {8191, 0x9747b28cu, 0x7ad11669u},
    {8191, 0xffffffffu, 0xd8ce5825u},
    {10000, 0x00000000u, 0x079affe3u},
    {10000, 0x00000001u, 0x74ba3ff4u},
    {10000, 0x9747b28cu, 0x61df98b0u},
    {10000, 0xffffffffu, 0x641033b7u},
};
/* END GENERATED VECTORS */

/* The pattern of hash_vectors_gen.py: byte i is the top byte of
 * i * 2654435761 mod 2^32. */
static void fill_pattern(uint8_t *buf, size_t n)
{
    size_t i;
    for (i = 0; i < n; i++)
        buf[i] = (uint8_t)((uint32_t)(i * 2654435761u) >> 24);
}

static void to_hex(const uint8_t *d, size_t n, char *out)
{
    static const char digits[] = "0123456789abcdef";
    size_t i;
    for (i = 0; i < n; i++) {
        out[2 * i] = digits[d[i] >> 4];
        out[2 * i + 1] = digits[d[i] & 15];
    }
    out[2 * n] = '\0';
}

static void check_hex(const char *what, size_t len, const uint8_t *got,
                      size_t n, const char *want)
{
    char hex[2 * 64 + 1];
    to_hex(got, n, hex);
    if (strcmp(hex, want) == 0) {
        g_passed++;
    } else {
        g_failed++;
        printf("FAIL %s len=%zu: got %s want %s\n", what, len, hex, want);
    }
}

static void check_u32(const char *what, size_t len, uint64_t seed,
                      uint32_t got, uint32_t want)
{
    if (got == want) {
        g_passed++;
    } else {
        g_failed++;
        printf("FAIL %s len=%zu seed=0x%llx: got 0x%08lx want 0x%08lx\n",
               what, len, (unsigned long long)seed, (unsigned long)got,
               (unsigned long)want);
    }
}

static void store32le(uint8_t *p, uint32_t v)
{
    size_t i;
    for (i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

/* A uniform view of every function, for the alignment checks: the result
 * is written to out (integers little-endian) and its size returned. */
typedef size_t (*hash_fn)(const void *data, size_t len, uint64_t seed,
                          uint8_t out[32]);

static size_t run_md5(const void *d, size_t n, uint64_t seed, uint8_t out[32])
{
    (void)seed;
    chash_md5(d, n, out);
    return CHASH_MD5_DIGEST_SIZE;
}

static size_t run_sha1(const void *d, size_t n, uint64_t seed, uint8_t out[32])
{
    (void)seed;
    chash_sha1(d, n, out);
    return CHASH_SHA1_DIGEST_SIZE;
}

static size_t run_murmur2(const void *d, size_t n, uint64_t seed,
                          uint8_t out[32])
{
    store32le(out, chash_murmur2(d, n, (uint32_t)seed));
    return 4;
}

static size_t run_murmur3(const void *d, size_t n, uint64_t seed,
                          uint8_t out[32])
{
    store32le(out, chash_murmur3_32(d, n, (uint32_t)seed));
    return 4;
}

/* Hashing the same bytes from every offset 0..7 of a buffer must give the
 * same result as hashing them in place. */
static void check_alignment(const char *what, hash_fn fn, const uint8_t *src,
                            size_t len, uint64_t seed)
{
    uint8_t ref[32], got[32];
    uint8_t *buf = malloc(len + 8);
    size_t off, n;

    if (buf == NULL) {
        g_failed++;
        printf("FAIL %s: out of memory\n", what);
        return;
    }
    n = fn(src, len, seed, ref);
    for (off = 1; off < 8; off++) {
        if (len > 0)
            memcpy(buf + off, src, len);
        fn(buf + off, len, seed, got);
        if (memcmp(ref, got, n) == 0) {
            g_passed++;
        } else {
            g_failed++;
            printf("FAIL %s len=%zu: result changes at offset %zu\n", what,
                   len, off);
        }
    }
    free(buf);
}

/* ---- MD5 --------------------------------------------------------------- */

static void test_md5(const uint8_t *pat)
{
    /* RFC 1321 appendix A.5, the test suite. */
    static const struct strdig rfc[] = {
        {"", "d41d8cd98f00b204e9800998ecf8427e"},
        {"a", "0cc175b9c0f1b6a831c399e269772661"},
        {"abc", "900150983cd24fb0d6963f7d28e17f72"},
        {"message digest", "f96b697d7cb7938d525a2f31aaf161d0"},
        {"abcdefghijklmnopqrstuvwxyz", "c3fcd3d76192e4007dfb496cca67e13b"},
        {"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789",
         "d174ab98d277d9f5a5611c2c9f419d9f"},
        {"1234567890123456789012345678901234567890"
         "1234567890123456789012345678901234567890",
         "57edf4a22be3c955ac49da2e2107b67a"},
    };
    uint8_t d[CHASH_MD5_DIGEST_SIZE];
    uint8_t *big;
    size_t i;

    for (i = 0; i < COUNT(rfc); i++) {
        size_t n = strlen(rfc[i].msg);
        chash_md5(rfc[i].msg, n, d);
        check_hex("md5 rfc1321", n, d, sizeof d, rfc[i].hex);
    }

    chash_md5(NULL, 0, d);
    check_hex("md5 NULL", 0, d, sizeof d, "d41d8cd98f00b204e9800998ecf8427e");

    big = malloc(1000000);
    if (big != NULL) {
        memset(big, 'a', 1000000);
        chash_md5(big, 1000000, d);
        check_hex("md5 a*10^6", 1000000, d, sizeof d,
                  "7707d6ae4e027c70eea2a935c2296f21");
        free(big);
    }

    for (i = 0; i < COUNT(md5_vectors); i++) {
        chash_md5(pat, md5_vectors[i].len, d);
        check_hex("md5", md5_vectors[i].len, d, sizeof d, md5_vectors[i].hex);
        check_alignment("md5", run_md5, pat, md5_vectors[i].len, 0);
    }
}

/* ---- SHA-1 ------------------------------------------------------------- */

static void test_sha1(const uint8_t *pat)
{
    /* The FIPS 180 / NIST example messages: "abc", the 448-bit and 896-bit
     * messages, and the empty string. */
    static const struct strdig nist[] = {
        {"", "da39a3ee5e6b4b0d3255bfef95601890afd80709"},
        {"abc", "a9993e364706816aba3e25717850c26c9cd0d89d"},
        {"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
         "84983e441c3bd26ebaae4aa1f95129e5e54670f1"},
        {"abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmn"
         "hijklmnoijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu",
         "a49b2446a02c645bf419f995b67091253a04a259"},
    };
    uint8_t d[CHASH_SHA1_DIGEST_SIZE];
    uint8_t *big;
    size_t i;

    for (i = 0; i < COUNT(nist); i++) {
        size_t n = strlen(nist[i].msg);
        chash_sha1(nist[i].msg, n, d);
        check_hex("sha1 fips180", n, d, sizeof d, nist[i].hex);
    }

    chash_sha1(NULL, 0, d);
    check_hex("sha1 NULL", 0, d, sizeof d,
              "da39a3ee5e6b4b0d3255bfef95601890afd80709");

    big = malloc(1000000);
    if (big != NULL) {
        memset(big, 'a', 1000000);
        chash_sha1(big, 1000000, d);
        check_hex("sha1 a*10^6", 1000000, d, sizeof d,
                  "34aa973cd4c4daa4f61eeb2bdbad27316534016f");
        free(big);
    }

    for (i = 0; i < COUNT(sha1_vectors); i++) {
        chash_sha1(pat, sha1_vectors[i].len, d);
        check_hex("sha1", sha1_vectors[i].len, d, sizeof d,
                  sha1_vectors[i].hex);
        check_alignment("sha1", run_sha1, pat, sha1_vectors[i].len, 0);
    }
}

/* Runs a table of oracle vectors for a 32-bit seeded function. */
static void run_vec32(const char *what, uint32_t (*fn)(const void *, size_t,
                                                       uint32_t),
                      hash_fn run, const struct vec32 *v, size_t n,
                      const uint8_t *pat)
{
    size_t i;
    for (i = 0; i < n; i++) {
        check_u32(what, v[i].len, v[i].seed, fn(pat, v[i].len, v[i].seed),
                  v[i].want);
        check_alignment(what, run, pat, v[i].len, v[i].seed);
    }
}

/* ---- MurmurHash2 / MurmurHash3 ----------------------------------------- */

static void test_murmur(const uint8_t *pat)
{
    static const char fox[] = "The quick brown fox jumps over the lazy dog";
    const size_t nfox = sizeof fox - 1;

    /* MurmurHash3 x86_32 values commonly published with the algorithm. */
    check_u32("murmur3 empty", 0, 0, chash_murmur3_32("", 0, 0), 0);
    check_u32("murmur3 empty", 0, 1, chash_murmur3_32("", 0, 1), 0x514e28b7u);
    check_u32("murmur3 empty", 0, 0xffffffffu,
              chash_murmur3_32(NULL, 0, 0xffffffffu), 0x81f16f39u);
    check_u32("murmur3 fox", nfox, 0, chash_murmur3_32(fox, nfox, 0),
              0x2e4ff723u);
    check_u32("murmur3 hello", 5, 0, chash_murmur3_32("hello", 5, 0),
              0x248bfa47u);
    /* MurmurHash2 of the empty string with seed 0 is 0 (every step of
     * the finalizer maps 0 to 0). */
    check_u32("murmur2 empty", 0, 0, chash_murmur2(NULL, 0, 0), 0);
    check_u32("murmur2 fox", nfox, 0, chash_murmur2(fox, nfox, 0),
              0x212729d0u);

    run_vec32("murmur2", chash_murmur2, run_murmur2, murmur2_vectors,
              COUNT(murmur2_vectors), pat);
    run_vec32("murmur3", chash_murmur3_32, run_murmur3, murmur3_vectors,
              COUNT(murmur3_vectors), pat);
}

int main(void)
{
    static uint8_t pat[PATTERN_MAX];

    fill_pattern(pat, sizeof pat);
    test_md5(pat);
    test_sha1(pat);
    test_murmur(pat);

    printf("%lu passed, %lu failed\n", g_passed, g_failed);
    return g_failed == 0 ? 0 : 1;
}
